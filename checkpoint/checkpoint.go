package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

// State is everything a checkpoint records: Meta plus the transactions in
// flight at its write-order id.
type State struct {
	Meta
	// InflightPuts are the put transactions that had written records but not
	// committed at W, oldest first.
	InflightPuts []eventqueue.InflightTx
	// InflightTakes are the take transactions that had taken events but not
	// committed at W, oldest first.
	InflightTakes []eventqueue.InflightTx
}

// Checkpoint is an open checkpoint file. It implements eventqueue.Slots over
// the file's ring (ring slot r is file slot HeaderSlots+r) with copy-on-write
// dirty pages, so the file changes only inside Write. See the package comment
// for the concurrency contract.
type Checkpoint struct {
	fsys     vfs.FS
	dir      string
	capacity int
	total    int // slots in the file: HeaderSlots + capacity
	store    slotStore

	pages pages // guarded by the caller's serialisation of Slot/SetSlot/Freeze/Thaw

	// readErrMu guards readErr: the first failed file read of the
	// Slot/SetSlot side. The slot values may be wrong from then on, so every
	// later Write fails with it.
	readErrMu sync.Mutex
	readErr   error

	// Used by Write only (one Write at a time).
	keys []int
	hdr  [headerUsed]uint64
	buf  []byte
}

// Create starts a fresh checkpoint in dir, which must exist. It removes any
// checkpoint files already there (see Remove), creates the checkpoint file
// sized for capacity and writes every byte of it (zeros, in 1 MiB chunks) so
// that the filesystem allocates all its blocks, writes its magic, capacity and
// INCOMPLETE marker, and fsyncs the file and dir. A full disk is an error
// wrapping syscall.ENOSPC here rather than a SIGBUS later; a Create that
// fails removes the file it created, so that a disk too small for it is not
// left fuller. It is not a valid checkpoint until the first successful Write.
func Create(fsys vfs.FS, dir string, capacity int) (*Checkpoint, error) {
	if capacity < 1 || capacity > maxCapacity {
		return nil, fmt.Errorf("create checkpoint in %s: capacity %d out of range [1, %d]", dir, capacity, maxCapacity)
	}
	if err := removeFiles(fsys, dir); err != nil {
		return nil, fmt.Errorf("create checkpoint in %s: %w", dir, err)
	}
	name := path(dir, CheckpointName)
	f, err := fsys.Create(name, vfs.FileMode(fsys))
	if err != nil {
		return nil, vfs.Named("create checkpoint in "+dir, err)
	}
	c, err := create(fsys, dir, f, capacity)
	if err != nil {
		// The file is this call's: removeFiles cleared the name first.
		return nil, errors.Join(fmt.Errorf("create checkpoint in %s: %w", dir, err), f.Close(),
			removeIfExists(fsys, name), fsys.SyncDir(dir))
	}
	return c, nil
}

func create(fsys vfs.FS, dir string, f vfs.File, capacity int) (*Checkpoint, error) {
	total := HeaderSlots + capacity
	size := int64(total) * 8
	if err := f.Truncate(size); err != nil {
		return nil, err
	}
	if err := writeZeros(f, size); err != nil {
		return nil, fmt.Errorf("allocate %d bytes: %w", size, err)
	}
	var h [headerUsed * 8]byte
	binary.BigEndian.PutUint64(h[slotMagic*8:], magicVersion)
	binary.BigEndian.PutUint64(h[slotMarker*8:], markerIncomplete)
	binary.BigEndian.PutUint64(h[slotCapacity*8:], uint64(capacity))
	if _, err := f.WriteAt(h[:], 0); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	if err := fsys.SyncDir(dir); err != nil {
		return nil, err
	}
	store, err := newStore(f, total)
	if err != nil {
		return nil, err
	}
	return newCheckpoint(fsys, dir, capacity, store), nil
}

func newCheckpoint(fsys vfs.FS, dir string, capacity int, store slotStore) *Checkpoint {
	c := &Checkpoint{fsys: fsys, dir: dir, capacity: capacity, total: HeaderSlots + capacity, store: store}
	c.pages.init()
	return c
}

// Open opens and validates the checkpoint in dir and returns it with the
// state it records. The capacity comes from the file, not the caller.
// Validation: the header has the right magic and version, the COMPLETE marker
// and a good CRC; the file length matches its capacity; checkpoint.meta
// decodes and agrees with the header on W, capacity, head and size; both
// inflight files decode and carry the same W; the live ring slots match the
// meta's ring CRC (Open reads them once: about 8 MB for 1M queued events).
//
// Open first checks the files' format versions (CheckFormat, which also
// reads the catalog and the files of every group dir in dir): if a newer
// release wrote one of them, it returns a *corrupt.FormatError (unwrapping
// to corrupt.ErrUnsupportedFormat, not to ErrBadCheckpoint): the checkpoint
// is not damaged, and recovery must stop rather than fall back and replace
// it. Otherwise Open returns ErrNoCheckpoint if neither the checkpoint file
// nor checkpoint.meta exists; any other failure wraps ErrBadCheckpoint (and
// ErrIncomplete, or a *corrupt.Error for bad bytes).
func Open(fsys vfs.FS, dir string) (*Checkpoint, *State, error) {
	if err := CheckFormat(fsys, dir); errors.Is(err, corrupt.ErrUnsupportedFormat) {
		return nil, nil, fmt.Errorf("open checkpoint in %s: %w", dir, err)
	} else if err != nil {
		return nil, nil, fmt.Errorf("open checkpoint in %s: %w: %w", dir, ErrBadCheckpoint, err)
	}
	name := path(dir, CheckpointName)
	_, cpErr := fsys.Stat(name)
	_, metaErr := fsys.Stat(path(dir, MetaName))
	if errors.Is(cpErr, fs.ErrNotExist) && errors.Is(metaErr, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("open checkpoint in %s: %w", dir, ErrNoCheckpoint)
	}
	bad := func(err error) error {
		return fmt.Errorf("open checkpoint in %s: %w: %w", dir, ErrBadCheckpoint, err)
	}
	if cpErr != nil {
		return nil, nil, bad(cpErr)
	}
	f, err := fsys.OpenReadWrite(name)
	if err != nil {
		return nil, nil, bad(err)
	}
	c, st, err := open(fsys, dir, f)
	if err != nil {
		return nil, nil, bad(err)
	}
	return c, st, nil
}

// open validates the checkpoint whose file f is. It takes ownership of f: on
// error it closes it.
func open(fsys vfs.FS, dir string, f vfs.File) (*Checkpoint, *State, error) {
	st, err := readState(fsys, dir, f)
	if err != nil {
		return nil, nil, errors.Join(err, f.Close())
	}
	store, err := newStore(f, HeaderSlots+st.Capacity)
	if err != nil {
		return nil, nil, errors.Join(err, f.Close())
	}
	if err := checkRing(store, f.Name(), st); err != nil {
		return nil, nil, errors.Join(err, store.close())
	}
	return newCheckpoint(fsys, dir, st.Capacity, store), st, nil
}

// validate checks the checkpoint in dir as Open does, but reads the
// checkpoint file with ReadAt only: it neither maps nor writes it, so the
// file may be sparse (a backup copy). It returns the checkpoint's
// write-order id.
func validate(fsys vfs.FS, dir string) (uint64, error) {
	f, err := fsys.Open(path(dir, CheckpointName))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBadCheckpoint, err)
	}
	st, err := readState(fsys, dir, f)
	if err == nil {
		err = checkRing(&fileStore{f: f}, f.Name(), st)
	}
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrBadCheckpoint, err)
	}
	if cerr := f.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close %s: %w", f.Name(), cerr))
	}
	if err != nil {
		return 0, err
	}
	return st.WriteOrderID, nil
}

// checkRing recomputes the ring CRC of st's live slots from s, the store of
// the checkpoint file name, and compares it with st.RingCRC.
func checkRing(s slotStore, name string, st *State) error {
	crc, err := ringCRC(s, st.Capacity, st.Head, st.Size)
	if err != nil {
		return err
	}
	if crc != st.RingCRC {
		return corrupt.New(name, int64(HeaderSlots+st.Head)*8,
			"ring checksum mismatch: %s has %#08x, the %d live slots from head %d give %#08x",
			MetaName, st.RingCRC, st.Size, st.Head, crc)
	}
	return nil
}

// readState reads and cross-checks the header of f, checkpoint.meta and the
// inflight files of dir: everything Open validates but the ring.
func readState(fsys vfs.FS, dir string, f vfs.File) (*State, error) {
	name := f.Name()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var hb [headerUsed * 8]byte
	if fi.Size() < int64(len(hb)) {
		return nil, corrupt.New(name, fi.Size(), "file length %d too short for the header", fi.Size())
	}
	if _, err := f.ReadAt(hb[:], 0); err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	h, err := decodeHeader(name, hb[:], fi.Size())
	if err != nil {
		return nil, err
	}
	st := new(State)
	metaName := path(dir, MetaName)
	b, err := readFramed(fsys, metaName, metaMagic, metaVersion)
	if err != nil {
		return nil, err
	}
	if st.Meta, err = decodeMeta(metaName, b); err != nil {
		return nil, err
	}
	for _, x := range []struct {
		off       int64
		what      string
		meta, hdr uint64
	}{
		{metaOffWriteID, "write-order id", st.WriteOrderID, h[slotWriteID]},
		{metaOffCapacity, "capacity", uint64(st.Capacity), h[slotCapacity]},
		{metaOffHead, "head", uint64(st.Head), h[slotHead]},
		{metaOffSize, "size", uint64(st.Size), h[slotSize]},
	} {
		if x.meta != x.hdr {
			return nil, corrupt.New(metaName, x.off, "%s %d, checkpoint file has %d", x.what, x.meta, x.hdr)
		}
	}
	for _, kind := range []InflightKind{InflightPuts, InflightTakes} {
		iname := path(dir, kind.String())
		b, err := readFramed(fsys, iname, kind.magic(), formatVersion)
		if err != nil {
			return nil, err
		}
		w, txs, err := decodeInflight(iname, kind, b)
		if err != nil {
			return nil, err
		}
		if w != st.WriteOrderID {
			return nil, corrupt.New(iname, inflightOffWriteID, "write-order id %d, checkpoint has %d", w, st.WriteOrderID)
		}
		if kind == InflightPuts {
			st.InflightPuts = txs
		} else {
			st.InflightTakes = txs
		}
	}
	return st, nil
}

// decodeHeader parses header slots 0..7 from b, the first bytes of the
// checkpoint file name of length size, and validates them (checkHeader). A
// header it accepts re-encodes to b[:64].
func decodeHeader(name string, b []byte, size int64) ([headerUsed]uint64, error) {
	var h [headerUsed]uint64
	if len(b) < headerUsed*8 {
		return h, corrupt.New(name, int64(len(b)), "header truncated: %d bytes, want %d", len(b), headerUsed*8)
	}
	for i := range h {
		h[i] = binary.BigEndian.Uint64(b[i*8:])
	}
	return h, checkHeader(name, &h, size)
}

// checkHeader validates header slots 0..7 of a checkpoint file of length
// size.
func checkHeader(name string, h *[headerUsed]uint64, size int64) error {
	if *h == [headerUsed]uint64{} {
		// A file whose Create never completed.
		return fmt.Errorf("%w: %s has an empty header", ErrIncomplete, name)
	}
	if h[slotMagic] != magicVersion {
		if err := newerCheckpointFile(name, h[slotMagic]); err != nil {
			return err // before the marker and the CRC, which a newer version may change
		}
		if h[slotMagic]&magicMask == magicVersion&magicMask {
			return corrupt.New(name, slotMagic*8, "unsupported version %d", uint32(h[slotMagic]))
		}
		return corrupt.New(name, slotMagic*8, "bad magic %#016x", h[slotMagic])
	}
	if h[slotMarker] != markerComplete {
		return fmt.Errorf("%w: %s marker is %#016x, not COMPLETE", ErrIncomplete, name, h[slotMarker])
	}
	if want := uint64(headerCRC(h)); h[slotHeaderCRC] != want {
		return corrupt.New(name, slotHeaderCRC*8, "header checksum %#x, computed %#x", h[slotHeaderCRC], want)
	}
	capacity := h[slotCapacity]
	if capacity < 1 || capacity > maxCapacity {
		return corrupt.New(name, slotCapacity*8, "capacity %d out of range", capacity)
	}
	if want := (int64(capacity) + HeaderSlots) * 8; size != want {
		return corrupt.New(name, size, "file length %d, want %d for capacity %d", size, want, capacity)
	}
	if h[slotHead] >= capacity {
		return corrupt.New(name, slotHead*8, "head %d not below capacity %d", h[slotHead], capacity)
	}
	if h[slotSize] > capacity {
		return corrupt.New(name, slotSize*8, "size %d above capacity %d", h[slotSize], capacity)
	}
	return nil
}

// Capacity is the number of ring slots.
func (c *Checkpoint) Capacity() int { return c.capacity }

// Len is the number of ring slots the Slots store holds, Capacity() (the
// file holds HeaderSlots more). eventqueue.New uses it to check the store is
// large enough.
func (c *Checkpoint) Len() int { return c.capacity }

// Write persists the frozen generation and st as a complete checkpoint. It
// runs without the queue lock, concurrently with Slot and SetSlot, between
// Freeze and Thaw. st.Capacity must equal Capacity(); st is checked before
// anything is written, and an invalid st is an error that leaves the file
// untouched.
//
// Order: the marker becomes INCOMPLETE and is flushed; the frozen pages are
// copied into the file in ascending order; the ring CRC is computed from the
// live slots now in the file (one read of size*8 bytes); header slots 1, 2,
// 3, 5, 6 are written and flushed; inflightputs, inflighttakes and
// checkpoint.meta (with the ring CRC) are published (write-tmp, fsync,
// rename, fsync-dir); the marker becomes COMPLETE with the header CRC and is
// flushed. A crash leaves the previous checkpoint (before the first flush),
// an incomplete one, or (after the last flush) this one. On error the caller
// calls Thaw(false) so the next Write retries the pages; a Write that fails
// its checks before the first flush leaves the previous checkpoint valid.
func (c *Checkpoint) Write(st *State) error {
	if err := c.write(st); err != nil {
		return fmt.Errorf("write checkpoint in %s: %w", c.dir, err)
	}
	return nil
}

func (c *Checkpoint) write(st *State) error {
	if st == nil {
		return errors.New("nil state")
	}
	if st.Capacity != c.capacity {
		return fmt.Errorf("state capacity %d, checkpoint capacity %d", st.Capacity, c.capacity)
	}
	m := st.Meta // st.RingCRC is ignored; m gets the computed one
	m.RingCRC = 0
	if err := validateMeta(&m); err != nil {
		return fmt.Errorf("invalid state: %w", err)
	}
	if err := validateInflight(InflightPuts, st.InflightPuts); err != nil {
		return fmt.Errorf("invalid state: %w", err)
	}
	if err := validateInflight(InflightTakes, st.InflightTakes); err != nil {
		return fmt.Errorf("invalid state: %w", err)
	}
	if err := c.getReadErr(); err != nil {
		return fmt.Errorf("earlier slot read failed: %w", err)
	}
	h := &c.hdr
	h[slotMarker] = markerIncomplete
	if err := c.store.writeSlots(slotMarker, h[slotMarker:slotMarker+1]); err != nil {
		return err
	}
	if err := c.store.flush(); err != nil {
		return fmt.Errorf("mark incomplete: %w", err)
	}
	for _, k := range c.frozenKeys() {
		lo, hi := c.pageRange(k)
		base := k << pageShift
		if err := c.store.writeSlots(lo, c.pages.frozen[k][lo-base:hi-base]); err != nil {
			return err
		}
	}
	crc, err := ringCRC(c.store, c.capacity, m.Head, m.Size)
	if err != nil {
		return fmt.Errorf("checksum ring: %w", err)
	}
	m.RingCRC = crc
	*h = [headerUsed]uint64{
		slotMagic:    magicVersion,
		slotWriteID:  st.WriteOrderID,
		slotSize:     uint64(st.Size),
		slotHead:     uint64(st.Head),
		slotMarker:   markerIncomplete,
		slotCapacity: uint64(st.Capacity),
		slotTime:     uint64(timeToNanos(st.Time)),
	}
	if err := c.store.writeSlots(slotWriteID, h[slotWriteID:slotHeaderCRC]); err != nil {
		return err
	}
	if err := c.store.flush(); err != nil {
		return fmt.Errorf("flush slots: %w", err)
	}
	w := st.WriteOrderID
	c.buf = appendInflight(c.buf[:0], InflightPuts, w, st.InflightPuts)
	if err := vfs.WriteFileAtomic(c.fsys, path(c.dir, InflightPutsName), c.buf); err != nil {
		return err
	}
	c.buf = appendInflight(c.buf[:0], InflightTakes, w, st.InflightTakes)
	if err := vfs.WriteFileAtomic(c.fsys, path(c.dir, InflightTakesName), c.buf); err != nil {
		return err
	}
	c.buf = appendMeta(c.buf[:0], &m)
	if err := vfs.WriteFileAtomic(c.fsys, path(c.dir, MetaName), c.buf); err != nil {
		return err
	}
	h[slotMarker] = markerComplete
	h[slotHeaderCRC] = uint64(headerCRC(h))
	if err := c.store.writeSlots(slotMarker, h[slotMarker:]); err != nil {
		return err
	}
	if err := c.store.flush(); err != nil {
		return fmt.Errorf("mark complete: %w", err)
	}
	return nil
}

func (c *Checkpoint) setReadErr(err error) {
	c.readErrMu.Lock()
	if c.readErr == nil {
		c.readErr = err
	}
	c.readErrMu.Unlock()
}

func (c *Checkpoint) getReadErr() error {
	c.readErrMu.Lock()
	defer c.readErrMu.Unlock()
	return c.readErr
}

// Close unmaps and closes the checkpoint file. It writes nothing: buffered
// dirty pages are dropped. The Checkpoint must not be used afterwards.
func (c *Checkpoint) Close() error {
	if c.store == nil {
		return nil
	}
	err := c.store.close()
	c.store = nil
	if err != nil {
		return fmt.Errorf("close checkpoint in %s: %w", c.dir, err)
	}
	return nil
}
