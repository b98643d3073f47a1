package checkpoint

import (
	"fmt"

	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/internal/zeros"
)

// Block allocation. The checkpoint file is read through a memory mapping, and
// touching a page of a mapping whose blocks the filesystem must still
// allocate (a hole; on tmpfs even for a read) raises SIGBUS when the disk is
// full, which kills the process. So every block of the checkpoint file is
// allocated when the file is made: Create and RestoreBackup write every byte
// of it (zeros where there is nothing else), and newStore fills any hole left
// in a file made otherwise before it maps it. Writes never go through the
// mapping (see mmapStore).

// allocChunk is the largest write (and read) made to allocate a file.
const allocChunk = 1 << 20

// sectorSize is the granularity at which allocate looks for holes: no
// filesystem allocates smaller blocks.
const sectorSize = 512

// writeZeros writes zeros over bytes [0, size) of f, in chunks of up to
// allocChunk bytes, so that the filesystem allocates every block.
func writeZeros(f vfs.File, size int64) error {
	buf := make([]byte, min(size, allocChunk))
	for off := int64(0); off < size; {
		n := min(size-off, int64(len(buf)))
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// allocate makes sure every block of the size bytes of f is allocated. If the
// filesystem reports fewer allocated bytes than size (see sparse), it reads
// the file and writes every all-zero run of sectors back as zeros (which
// leaves the bytes unchanged, so a crash midway is harmless), then syncs f.
// On a filesystem that compresses, or turns zero blocks into holes, this is
// repeated at every Open; it costs a read of the file.
func allocate(f vfs.File, size int64) error {
	holes, err := sparse(f, size)
	if err != nil || !holes {
		return err
	}
	if err := fillHoles(f, size); err != nil {
		return fmt.Errorf("allocate %s: %w", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("allocate %s: sync: %w", f.Name(), err)
	}
	return nil
}

func fillHoles(f vfs.File, size int64) error {
	buf := make([]byte, min(size, allocChunk))
	for off := int64(0); off < size; off += int64(len(buf)) {
		b := buf[:min(size-off, int64(len(buf)))]
		if _, err := f.ReadAt(b, off); err != nil {
			return err
		}
		// Write back each maximal run of all-zero sectors.
		run := -1 // start of the current zero run; -1 when in data
		for i := 0; i < len(b); i += sectorSize {
			if zeros.All(b[i:min(i+sectorSize, len(b))]) {
				if run < 0 {
					run = i
				}
				continue
			}
			if run >= 0 {
				if _, err := f.WriteAt(b[run:i], off+int64(run)); err != nil {
					return err
				}
				run = -1
			}
		}
		if run >= 0 {
			if _, err := f.WriteAt(b[run:], off+int64(run)); err != nil {
				return err
			}
		}
	}
	return nil
}
