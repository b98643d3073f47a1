package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/edsrzf/mmap-go"

	"github.com/flumego/filechannel/internal/vfs"
)

// slotStore is the checkpoint file seen as an array of big-endian uint64
// slots. The Slot/SetSlot side calls slot and readSlots; Write (and Open,
// before the store is shared) calls writeSlots, checksum and flush. The two
// sides run concurrently but never write the same slots (Write writes only
// frozen pages and the header, which the other side reads from memory or not
// at all; checksum only reads), and each side has its own buffers, so
// implementations need no lock.
type slotStore interface {
	slot(i int) (uint64, error)
	readSlots(first int, dst []uint64) error
	writeSlots(first int, src []uint64) error
	// checksum extends the CRC32C crc over the stored bytes of the n slots
	// from physical slot first.
	checksum(crc uint32, first, n int) (uint32, error)
	// flush makes every slot written so far durable.
	flush() error
	// close releases the store and closes the file; it writes nothing.
	close() error
}

// newStore returns the slot store of f (total slots long), taking ownership
// of f. A real file is mapped read-only for Slot, readSlots and checksum and
// written with WriteAt; before mapping it, newStore allocates any block of the
// file that is a hole (see allocate), so that no access through the mapping
// needs the filesystem to allocate a block. Other files (in-memory test
// filesystems) use ReadAt/WriteAt for everything.
func newStore(f vfs.File, total int) (slotStore, error) {
	fst := &fileStore{f: f}
	osf, ok := f.(vfs.OSFile)
	if !ok {
		return fst, nil
	}
	if err := allocate(f, int64(total)*8); err != nil {
		return nil, err
	}
	m, err := mmap.MapRegion(osf.OSFile(), total*8, mmap.RDONLY, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", f.Name(), err)
	}
	return &mmapStore{fileStore: fst, m: m}, nil
}

// mmapStore reads the slots through a shared read-only mapping and writes
// them with WriteAt (pwrite) and File.Sync, inherited from fileStore, never
// through the mapping: a write that needs a block the filesystem cannot
// allocate (a full disk; any overwrite on a copy-on-write filesystem) is then
// an error return instead of a SIGBUS. The mapping sees those writes through
// the page cache. Reads through it are safe because every block of the file
// is allocated (Create, RestoreBackup and newStore see to it); on tmpfs even a
// read fault on a hole allocates a page.
type mmapStore struct {
	*fileStore
	m mmap.MMap
}

func (s *mmapStore) slot(i int) (uint64, error) {
	return binary.BigEndian.Uint64(s.m[i*8:]), nil
}

func (s *mmapStore) readSlots(first int, dst []uint64) error {
	b := s.m[first*8 : (first+len(dst))*8]
	for j := range dst {
		dst[j] = binary.BigEndian.Uint64(b[j*8:])
	}
	return nil
}

func (s *mmapStore) checksum(crc uint32, first, n int) (uint32, error) {
	return crc32.Update(crc, crcTable, s.m[first*8:(first+n)*8]), nil
}

func (s *mmapStore) close() error {
	return errors.Join(s.m.Unmap(), s.f.Close())
}

// fileStore reads and writes the slots with ReadAt/WriteAt and flushes with
// File.Sync. mmapStore uses its writeSlots and flush.
type fileStore struct {
	f    vfs.File
	rbuf [pageSlots * 8]byte // Slot/SetSlot side
	wbuf [pageSlots * 8]byte // Write side
	cbuf []byte              // Write side: checksum reads, up to checksumChunk bytes
}

// checksumChunk is the largest read fileStore.checksum makes.
const checksumChunk = 1 << 20

func (s *fileStore) slot(i int) (uint64, error) {
	b := s.rbuf[:8]
	if _, err := s.f.ReadAt(b, int64(i)*8); err != nil {
		return 0, fmt.Errorf("read slot %d of %s: %w", i, s.f.Name(), err)
	}
	return binary.BigEndian.Uint64(b), nil
}

func (s *fileStore) readSlots(first int, dst []uint64) error {
	for len(dst) > 0 {
		n := min(len(dst), pageSlots)
		b := s.rbuf[:n*8]
		if _, err := s.f.ReadAt(b, int64(first)*8); err != nil {
			return fmt.Errorf("read slots %d..%d of %s: %w", first, first+n-1, s.f.Name(), err)
		}
		for j := range n {
			dst[j] = binary.BigEndian.Uint64(b[j*8:])
		}
		dst, first = dst[n:], first+n
	}
	return nil
}

func (s *fileStore) writeSlots(first int, src []uint64) error {
	for len(src) > 0 {
		n := min(len(src), pageSlots)
		b := s.wbuf[:n*8]
		for j, v := range src[:n] {
			binary.BigEndian.PutUint64(b[j*8:], v)
		}
		if _, err := s.f.WriteAt(b, int64(first)*8); err != nil {
			return fmt.Errorf("write slots %d..%d of %s: %w", first, first+n-1, s.f.Name(), err)
		}
		src, first = src[n:], first+n
	}
	return nil
}

func (s *fileStore) checksum(crc uint32, first, n int) (uint32, error) {
	if want := min(n*8, checksumChunk); len(s.cbuf) < want {
		s.cbuf = make([]byte, want)
	}
	for n > 0 {
		k := min(n, len(s.cbuf)/8)
		b := s.cbuf[:k*8]
		if _, err := s.f.ReadAt(b, int64(first)*8); err != nil {
			return 0, fmt.Errorf("read slots %d..%d of %s: %w", first, first+k-1, s.f.Name(), err)
		}
		crc = crc32.Update(crc, crcTable, b)
		first, n = first+k, n-k
	}
	return crc, nil
}

func (s *fileStore) flush() error {
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", s.f.Name(), err)
	}
	return nil
}

func (s *fileStore) close() error { return s.f.Close() }
