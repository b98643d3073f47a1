package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"runtime/debug"
	"sync"

	"github.com/edsrzf/mmap-go"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

// The delivery journal (JournalName in the checkpoint dir) is where the
// channel notes each Take of a consumer group that counts deliveries: one
// entry (group, event, count) per Take, stored through a shared memory
// mapping of the file, so that noting a delivery costs no system call and
// is in the kernel (it survives a crash of the process) when Take
// returns. It is never synced: a power loss may lose, keep or tear any
// part of it. The channel takes a count from it only if it is larger than
// the one it has and the event is still queued in that group, and it
// erases an event's entries (durably) before it redrives the event into a
// group, so that a count it finds is never larger than the deliveries
// since the event last arrived in its group.
//
// Layout (all integers big-endian):
//
//	header, 32 bytes:
//	0   4  magic "FCDJ"
//	4   2  version 1
//	6   2  reserved, zero
//	8   4  entry count N (journalMinEntries..journalMaxEntries)
//	12  4  reserved, zero
//	16  8  salt: random when the file is created
//	24  4  CRC32C of bytes 0..23
//	28  4  reserved, zero
//	N entries of 24 bytes from offset 32, written in turn as a ring:
//	+0  8  event pointer (0: an empty entry)
//	+8  4  group id
//	+12 4  count >= 1
//	+16 4  CRC32C of the salt (8 bytes, BE) then bytes +0..+15
//	+20 4  zero
//
// An entry whose checksum does not match (never written, torn, erased, or
// left by an earlier file) is not an entry. A file whose header does not
// check is none at all: ReadJournal returns no entries. A file longer than
// its header's entry count allows is damage (no crash lengthens it).

// JournalName is the delivery journal's file name in a checkpoint dir.
const JournalName = "deliveries"

// Journal layout; part of the on-disk format.
const (
	journalMagic      = "FCDJ"
	journalVersion    = 1
	journalHeaderLen  = 32
	journalEntryLen   = 24
	journalMinEntries = 16
	journalMaxEntries = JournalMaxEntries
	// JournalMaxEntries is the largest journal's entry count.
	JournalMaxEntries = 1 << 24
	// JournalEntries is the entry count of the journals the channel
	// creates: 32768 entries (768 KiB), the last 32768 Takes.
	JournalEntries = 1 << 15
)

// JournalEntry is one noted delivery: the event's count in the group.
type JournalEntry struct {
	Pointer uint64 // never 0
	Group   uint32
	Count   uint32 // >= 1
}

// ReadJournal returns the entries of the delivery journal in dir, in file
// order, or none if there is none (or its header does not check). It
// reads the header, then the entries in pieces of readChunk bytes: its
// memory is that of the valid entries it returns. Only I/O errors, a
// journal that is not a regular file, a newer release's journal (a
// *corrupt.FormatError) and a journal longer than its header's entry count
// allows (a *corrupt.Error: no crash lengthens it) are errors.
func ReadJournal(fsys vfs.FS, dir string) ([]JournalEntry, error) {
	name := path(dir, JournalName)
	f, err := fsys.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read delivery journal: %w", err)
	}
	defer f.Close() // read-only: a close error loses nothing
	out, err := readJournal(f, name)
	if err != nil {
		return nil, fmt.Errorf("read delivery journal: %w", err)
	}
	return out, nil
}

// readJournal is ReadJournal on the open file f (name).
func readJournal(f vfs.File, name string) ([]JournalEntry, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var hb [journalHeaderLen]byte
	k, err := f.ReadAt(hb[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	b := hb[:k]
	if len(b) >= versionEnd {
		// A newer release's journal is refused, not taken for damage.
		if err := newerFileThan(name, b, journalMagic, journalVersion); err != nil {
			return nil, err
		}
	}
	salt, n, ok := decodeJournalHeader(b)
	if !ok {
		return nil, nil
	}
	size := journalSize(n)
	if fi.Size() <= journalHeaderLen {
		return nil, nil // it shrank since Stat: no entries
	}
	if fi.Size() > size {
		return nil, corrupt.New(name, size, "file length %d, longer than the %d bytes of its %d entries", fi.Size(), size, n)
	}
	var out []JournalEntry
	buf := make([]byte, min(fi.Size()-journalHeaderLen, readChunk/journalEntryLen*journalEntryLen))
	for off := int64(journalHeaderLen); off < fi.Size(); {
		k, err := f.ReadAt(buf[:min(int64(len(buf)), fi.Size()-off)], off)
		for e := buf[:k-k%journalEntryLen]; len(e) > 0; e = e[journalEntryLen:] {
			if x, ok := decodeJournalEntry(e[:journalEntryLen], salt); ok {
				out = append(out, x)
			}
		}
		off += int64(k)
		if errors.Is(err, io.EOF) || (err == nil && k == 0) {
			break // shorter than it was: a torn entry at most
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// journalSize is the length of a journal of n entries.
func journalSize(n int) int64 { return journalHeaderLen + int64(n)*journalEntryLen }

func decodeJournalHeader(b []byte) (salt uint64, n int, ok bool) {
	if len(b) < journalHeaderLen || string(b[:4]) != journalMagic {
		return 0, 0, false
	}
	be := binary.BigEndian
	if be.Uint16(b[4:]) != journalVersion || be.Uint32(b[24:]) != crc32.Checksum(b[:24], crcTable) {
		return 0, 0, false
	}
	n = int(be.Uint32(b[8:]))
	if n < journalMinEntries || n > journalMaxEntries {
		return 0, 0, false
	}
	return be.Uint64(b[16:]), n, true
}

// journalEntryCRC is an entry's checksum: CRC32C of the salt then the
// entry's first 16 bytes, computed in scratch (24 bytes; a caller's
// buffer, so that Add allocates nothing).
func journalEntryCRC(salt uint64, e, scratch []byte) uint32 {
	binary.BigEndian.PutUint64(scratch, salt)
	copy(scratch[8:24], e[:16])
	return crc32.Checksum(scratch[:24], crcTable)
}

func decodeJournalEntry(e []byte, salt uint64) (JournalEntry, bool) {
	be := binary.BigEndian
	x := JournalEntry{Pointer: be.Uint64(e), Group: be.Uint32(e[8:]), Count: be.Uint32(e[12:])}
	var scratch [24]byte
	if x.Pointer == 0 || x.Count == 0 || be.Uint32(e[20:]) != 0 || be.Uint32(e[16:]) != journalEntryCRC(salt, e, scratch[:]) {
		return JournalEntry{}, false
	}
	return x, true
}

func encodeJournalEntry(dst []byte, x JournalEntry, salt uint64, scratch []byte) {
	be := binary.BigEndian
	be.PutUint64(dst, x.Pointer)
	be.PutUint32(dst[8:], x.Group)
	be.PutUint32(dst[12:], x.Count)
	be.PutUint32(dst[16:], journalEntryCRC(salt, dst, scratch))
	be.PutUint32(dst[20:], 0)
}

// Journal is an open delivery journal. Its methods are safe for
// concurrent use (it has its own lock, taken by no one else).
type Journal struct {
	mu   sync.Mutex
	f    vfs.File
	m    mmap.MMap // the file mapped read-write; nil: entries are written with WriteAt
	salt uint64
	n    int // entries
	next int // the entry the next Add writes
	buf  [journalEntryLen]byte
	crc  [24]byte // journalEntryCRC's scratch
	// fault is the first fault a store through the mapping took (a full
	// copy-on-write filesystem): the journal then writes with WriteAt.
	fault   error
	onFault func(error)
	// broken is the first failure to make the journal durable (Erase):
	// every later Erase fails with it, since a later sync that succeeds
	// says nothing of the pages the failed one lost.
	broken error
}

// OnFault sets a function the journal calls (with its lock held: it must
// not call the journal) when a store through the mapping faults and it
// falls back to WriteAt.
func (j *Journal) OnFault(f func(error)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.onFault = f
}

// RemoveJournal removes dir's delivery journal, if any, durably (a power
// loss does not bring it back).
func RemoveJournal(fsys vfs.FS, dir string) error {
	err := fsys.Remove(path(dir, JournalName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil {
		err = fsys.SyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("remove delivery journal: %w", err)
	}
	return nil
}

// Entries returns the journal's entry count: the last Entries deliveries
// are kept.
func (j *Journal) Entries() int { return j.n }

// Mapped reports whether entries are stored through a memory mapping
// (else with WriteAt).
func (j *Journal) Mapped() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.m != nil
}

// Add notes an entry, overwriting the oldest once every entry is used.
func (j *Journal) Add(x JournalEntry) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	off := journalHeaderLen + j.next*journalEntryLen
	encodeJournalEntry(j.buf[:], x, j.salt, j.crc[:])
	if err := j.store(off, j.buf[:]); err != nil {
		return err
	}
	j.next++
	if j.next == j.n {
		j.next = 0
	}
	return nil
}

// store writes b at off, through the mapping if there is one. A fault of
// the mapping (the filesystem could not give the page a block: a full
// copy-on-write filesystem) is recovered: the journal unmaps the file and
// writes with WriteAt from then on. The caller holds mu.
func (j *Journal) store(off int, b []byte) error {
	if j.m != nil {
		err := j.storeMapped(off, b)
		if err == nil {
			return nil
		}
		j.fault = err
		j.m.Unmap()
		j.m = nil
		if j.onFault != nil {
			j.onFault(err)
		}
	}
	if _, err := j.f.WriteAt(b, int64(off)); err != nil {
		return fmt.Errorf("write delivery journal: %w", err)
	}
	return nil
}

// storeMapped copies b into the mapping at off, turning a fault into an
// error.
func (j *Journal) storeMapped(off int, b []byte) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("store to the delivery journal's mapping faulted: %v", r)
		}
	}()
	copy(j.m[off:off+len(b)], b)
	return nil
}

// Fault returns the fault that made the journal stop using its mapping,
// or nil.
func (j *Journal) Fault() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.fault
}

// Erase erases every entry of group whose pointer is in ptrs, then makes
// the journal durable (msync, or Sync): after it returns, no power loss
// brings those entries back.
func (j *Journal) Erase(group uint32, ptrs map[uint64]bool) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.broken != nil {
		return j.broken
	}
	var e [journalEntryLen]byte
	var zero [journalEntryLen]byte
	for i := range j.n {
		off := journalHeaderLen + i*journalEntryLen
		if err := j.load(off, e[:]); err != nil {
			return err
		}
		x, ok := decodeJournalEntry(e[:], j.salt)
		if !ok || x.Group != group || !ptrs[x.Pointer] {
			continue
		}
		if err := j.store(off, zero[:]); err != nil {
			return err
		}
	}
	var err error
	if j.m != nil {
		err = j.m.Flush()
	} else {
		err = j.f.Sync()
	}
	if err != nil {
		j.broken = fmt.Errorf("sync delivery journal (it stays unusable for erasing until the channel reopens): %w", err)
		return j.broken
	}
	return nil
}

// load reads the entry at off. The caller holds mu.
func (j *Journal) load(off int, dst []byte) error {
	if j.m != nil {
		copy(dst, j.m[off:off+len(dst)]) // a page written before: no fault
		return nil
	}
	if _, err := j.f.ReadAt(dst, int64(off)); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read delivery journal: %w", err)
	}
	return nil
}

// Close unmaps and closes the journal; it syncs nothing.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	var err error
	if j.m != nil {
		err = j.m.Unmap()
		j.m = nil
	}
	if j.f != nil {
		err = errors.Join(err, j.f.Close())
		j.f = nil
	}
	return err
}
