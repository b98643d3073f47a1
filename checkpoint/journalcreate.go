package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"syscall"

	"github.com/edsrzf/mmap-go"

	"github.com/flumego/filechannel/internal/vfs"
)

// CreateJournal starts dir's delivery journal afresh: n entries
// (JournalEntries if n is 0) holding live (those beyond the entry count
// are left out), under salt, a new random value, so that no entry of the
// old journal counts any more. It asks the filesystem for no new room
// where it can help it, so that a channel opens on a disk it filled:
//
//  1. A journal file of exactly that length already there (whatever it
//     holds) is rewritten in place, then synced, and dir is synced.
//  2. Otherwise (or if that fails) deliveries.tmp is written in full (so that every block of
//     it is allocated before it is mapped), renamed over the old one, and
//     dir is synced.
//  3. If step 2 finds no room (ENOSPC), deliveries.tmp is removed and an
//     old journal file of another length a journal can have is rewritten
//     in place at its own length, as in step 1: Entries then tells.
//
// A power loss during a rewrite in place leaves each sector of the file
// old or new. Entries count only under the salt of the header that
// survives: under the old salt, some of the old entries (which this Open
// already read: they count no more than they did); under the new one, some
// of live; a torn header is no journal. Either way counts can only come
// out smaller, never larger. The rewrite is durable before CreateJournal
// returns, so before any Erase relies on it.
func CreateJournal(fsys vfs.FS, dir string, n int, salt uint64, live []JournalEntry) (*Journal, error) {
	if n == 0 {
		n = JournalEntries
	}
	if n < journalMinEntries || n > journalMaxEntries {
		return nil, fmt.Errorf("delivery journal of %d entries, want %d to %d", n, journalMinEntries, journalMaxEntries)
	}
	old := oldJournalEntries(fsys, path(dir, JournalName))
	var errs []error
	if old == n {
		j, err := rewriteJournal(fsys, dir, n, salt, live)
		if err == nil {
			return j, nil
		}
		errs = append(errs, err) // a file it cannot rewrite (read-only, say) is replaced
	}
	j, err := replaceJournal(fsys, dir, n, salt, live)
	if err == nil {
		return j, nil
	}
	errs = append(errs, err)
	if errors.Is(err, syscall.ENOSPC) && old > 0 && old != n {
		if j, err = rewriteJournal(fsys, dir, old, salt, live); err == nil {
			return j, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("create delivery journal: %w", errors.Join(errs...))
}

// oldJournalEntries returns the entry count that the length of name, a
// regular file, gives a journal, or 0 if none does (or there is no file).
func oldJournalEntries(fsys vfs.FS, name string) int {
	fi, err := fsys.Lstat(name)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() < journalSize(journalMinEntries) ||
		fi.Size() > journalSize(journalMaxEntries) || (fi.Size()-journalHeaderLen)%journalEntryLen != 0 {
		return 0
	}
	return int((fi.Size() - journalHeaderLen) / journalEntryLen)
}

// rewriteJournal overwrites dir's journal file, of n entries, with a new
// journal, and syncs it and dir.
func rewriteJournal(fsys vfs.FS, dir string, n int, salt uint64, live []JournalEntry) (*Journal, error) {
	f, err := fsys.OpenReadWrite(path(dir, JournalName))
	if err != nil {
		return nil, err
	}
	b, next := journalImage(n, salt, live)
	if _, err := f.WriteAt(b, 0); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	if err := f.Sync(); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	// A crash may have left the name itself not durable (a rename whose
	// dir sync never ran).
	if err := fsys.SyncDir(dir); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return mapJournal(f, n, salt, next), nil
}

// replaceJournal writes a new journal to deliveries.tmp, renames it over
// dir's journal and syncs dir (not the file: its entries need no sync).
// A failure removes deliveries.tmp, giving back its room.
func replaceJournal(fsys vfs.FS, dir string, n int, salt uint64, live []JournalEntry) (*Journal, error) {
	name, tmp := path(dir, JournalName), path(dir, JournalName+".tmp")
	if err := removeIfExists(fsys, tmp); err != nil {
		return nil, err
	}
	f, err := fsys.Create(tmp, vfs.FileMode(fsys))
	if err != nil {
		return nil, err
	}
	b, next := journalImage(n, salt, live)
	if _, err := f.WriteAt(b, 0); err != nil {
		return nil, errors.Join(err, f.Close(), removeIfExists(fsys, tmp))
	}
	if err := fsys.Rename(tmp, name); err != nil {
		return nil, errors.Join(err, f.Close(), removeIfExists(fsys, tmp))
	}
	// The rename must be durable before an Erase is: else a power loss
	// could bring back the old file, with entries an Erase erased only
	// from the new one. The file's own bytes need no sync.
	if err := fsys.SyncDir(dir); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return mapJournal(f, n, salt, next), nil
}

// journalImage returns the bytes of a journal of n entries under salt
// holding live (up to n of them), and the entry the next Add writes.
func journalImage(n int, salt uint64, live []JournalEntry) ([]byte, int) {
	b := make([]byte, journalSize(n))
	copy(b, journalMagic)
	be := binary.BigEndian
	be.PutUint16(b[4:], journalVersion)
	be.PutUint32(b[8:], uint32(n))
	be.PutUint64(b[16:], salt)
	be.PutUint32(b[24:], crc32.Checksum(b[:24], crcTable))
	live = live[:min(len(live), n)]
	var scratch [24]byte
	for i, x := range live {
		off := journalHeaderLen + i*journalEntryLen
		encodeJournalEntry(b[off:off+journalEntryLen], x, salt, scratch[:])
	}
	return b, len(live) % n
}

// mapJournal returns the journal of the open file f, n entries under salt,
// mapped read-write if it is a real file.
func mapJournal(f vfs.File, n int, salt uint64, next int) *Journal {
	j := &Journal{f: f, salt: salt, n: n, next: next}
	if osf, ok := f.(vfs.OSFile); ok {
		if m, err := mmap.MapRegion(osf.OSFile(), int(journalSize(n)), mmap.RDWR, 0, 0); err == nil {
			j.m = m
		}
		// Without a mapping (an error here), entries are written with
		// WriteAt: slower, as safe.
	}
	return j
}
