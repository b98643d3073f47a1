package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"time"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

// Group is one consumer group as the catalog records it.
type Group struct {
	ID            uint32 // 0: the unnamed group (its ring is the top-level checkpoint)
	Name          string // "" for ID 0; 1 to MaxGroupNameLen bytes for the others, distinct
	Since         uint64 // write-order id when the group was created
	Capacity      int    // of its ring: 1 to the largest capacity Create takes
	Policy        uint8  // 0 block, 1 drop oldest, 2 drop newest
	MaxDeliveries uint32
	DeadLetter    string // at most MaxGroupNameLen bytes
	// DeadLetterGroup: the group receives dead letters, not puts.
	DeadLetterGroup bool
	// Filter is the group's filter expression ("" = every event), at
	// most 4096 bytes: a catalog with one is written as version 3.
	Filter string
	// Deliveries is the delivery counts of the group's events that were
	// delivered and not taken for good (groups with MaxDeliveries), in
	// strictly ascending Pointer order; each Count >= 1.
	Deliveries []Delivery
	// Waiting is the group's events waiting for their retry delay, in
	// strictly ascending Pointer order; each Due >= 1. A catalog with
	// one is written as version 4.
	Waiting []Waiting
	// The group's take options (logfile.GroupInfo's): OrderKey at most
	// logfile.MaxOrderKeyLen bytes, at most logfile.MaxRetryDelays
	// RetryDelays, no duration negative. A catalog in which a group has
	// one is written as version 5.
	OrderKey     string
	RetryDelays  []time.Duration
	LeaseTimeout time.Duration
	ExpireAfter  time.Duration
}

// hasOptions reports whether g has a take option.
func (g *Group) hasOptions() bool {
	gi := g.GroupInfo()
	return gi.HasOptions()
}

// Waiting is an event waiting in a group until its due time.
type Waiting struct {
	Pointer uint64 // the event (an eventqueue.Pointer; never 0)
	Due     int64  // Unix nanoseconds, >= 1
}

// Delivery is one event's delivery count in a group.
type Delivery struct {
	Pointer uint64 // the event (an eventqueue.Pointer; never 0)
	Count   uint32
}

// Catalog is the content of the groups file: which consumer groups a
// checkpoint directory holds, as of the checkpoint set with write-order id
// WriteOrderID. Group N >= 1 has its ring in GroupDir(dir, N); group 0, if
// listed, in dir's top-level checkpoint (which holds a 1-slot empty ring
// when there is no unnamed group).
type Catalog struct {
	WriteOrderID uint64
	NextGroupID  uint32  // ids below it were handed out; never reused
	Groups       []Group // strictly ascending by ID; every ID < NextGroupID
}

// WriteCatalog publishes c as dir's groups file (write groups.tmp, fsync,
// rename, fsync dir). An invalid c (see Group and Catalog) is an error that
// writes nothing. The channel writes a checkpoint set as every group dir's
// Write, then WriteCatalog, then the top-level Write, all with the same
// write-order id.
func WriteCatalog(fsys vfs.FS, dir string, c *Catalog) error {
	if err := validateCatalog(c); err != nil {
		return fmt.Errorf("write group catalog in %s: invalid catalog: %w", dir, err)
	}
	if err := vfs.WriteFileAtomic(fsys, path(dir, CatalogName), EncodeCatalog(c)); err != nil {
		return fmt.Errorf("write group catalog in %s: %w", dir, err)
	}
	return nil
}

// ReadCatalog reads and decodes dir's groups file. A dir without one (an
// older release's, or a channel with only the unnamed group) gives an
// error matching fs.ErrNotExist; one that is not a regular file (a symbolic
// link, never followed) an error matching vfs.ErrNotRegular; bad bytes a
// *corrupt.Error naming the file's path; a newer format version a
// *corrupt.FormatError.
func ReadCatalog(fsys vfs.FS, dir string) (*Catalog, error) {
	name := path(dir, CatalogName)
	b, err := readFramed(fsys, name, catalogMagic, catalogVersion)
	if err != nil {
		return nil, fmt.Errorf("read group catalog: %w", err)
	}
	c, err := decodeCatalog(name, b)
	if err != nil {
		return nil, fmt.Errorf("read group catalog: %w", err)
	}
	return c, nil
}

// EncodeCatalog returns the groups file bytes of c. c must be valid:
// WriteCatalog checks that first; DecodeCatalog rejects the bytes of an
// invalid Catalog.
func EncodeCatalog(c *Catalog) []byte {
	dst := make([]byte, 0, catalogFixedLen+len(c.Groups)*(groupFixedLen+16)+crcLen)
	dst = append(dst, catalogMagic...)
	version := uint16(catalogUnfilteredVersion)
	switch {
	case catalogOptions(c):
		version = catalogVersion
	case catalogWaiting(c):
		version = catalogWaitingVersion
	case catalogFiltered(c):
		version = catalogFilteredVersion
	}
	dst = binary.BigEndian.AppendUint16(dst, version)
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint64(dst, c.WriteOrderID)
	dst = binary.BigEndian.AppendUint32(dst, c.NextGroupID)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(c.Groups)))
	for i := range c.Groups {
		g := &c.Groups[i]
		dst = binary.BigEndian.AppendUint32(dst, g.ID)
		dst = binary.BigEndian.AppendUint64(dst, g.Since)
		dst = binary.BigEndian.AppendUint64(dst, uint64(g.Capacity))
		dst = binary.BigEndian.AppendUint32(dst, g.MaxDeliveries)
		var flags byte
		if g.DeadLetterGroup {
			flags |= groupFlagDeadLetter
		}
		dst = append(dst, g.Policy, byte(len(g.Name)), byte(len(g.DeadLetter)), flags)
		dst = append(dst, g.Name...)
		dst = append(dst, g.DeadLetter...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(g.Deliveries)))
		for _, d := range g.Deliveries {
			dst = binary.BigEndian.AppendUint64(dst, d.Pointer)
			dst = binary.BigEndian.AppendUint32(dst, d.Count)
		}
		if version >= 3 {
			dst = binary.BigEndian.AppendUint16(dst, uint16(len(g.Filter)))
			dst = append(dst, g.Filter...)
		}
		if version >= 4 {
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(g.Waiting)))
			for _, w := range g.Waiting {
				dst = binary.BigEndian.AppendUint64(dst, w.Pointer)
				dst = binary.BigEndian.AppendUint64(dst, uint64(w.Due))
			}
		}
		if version >= 5 {
			dst = appendOptions(dst, g)
		}
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst, crcTable))
}

// catalogOptions reports whether a group of c has a take option.
func catalogOptions(c *Catalog) bool {
	return slices.ContainsFunc(c.Groups, func(g Group) bool { return g.hasOptions() })
}

// catalogWaiting reports whether a group of c has waiting events.
func catalogWaiting(c *Catalog) bool {
	for i := range c.Groups {
		if len(c.Groups[i].Waiting) > 0 {
			return true
		}
	}
	return false
}

// catalogFiltered reports whether a group of c has a filter.
func catalogFiltered(c *Catalog) bool {
	for i := range c.Groups {
		if c.Groups[i].Filter != "" {
			return true
		}
	}
	return false
}

// DecodeCatalog parses groups file bytes. Bad bytes give a *corrupt.Error
// naming the file "groups" and the offset of the bad field; a newer format
// version gives a *corrupt.FormatError. No groups decode as nil Groups.
func DecodeCatalog(b []byte) (*Catalog, error) { return decodeCatalog(CatalogName, b) }

func decodeCatalog(file string, b []byte) (*Catalog, error) {
	body, version, err := checkFrameUpTo(file, b, catalogMagic, catalogFixedLen, catalogVersion)
	if err != nil {
		return nil, err
	}
	be := binary.BigEndian
	c := &Catalog{WriteOrderID: be.Uint64(body[catalogOffWriteID:]), NextGroupID: be.Uint32(body[catalogOffNextGroup:])}
	n := be.Uint32(body[catalogOffCount:])
	off := catalogFixedLen
	if uint64(n) > uint64(len(body)-off)/groupFixedLen {
		return nil, corrupt.New(file, catalogOffCount, "group count %d exceeds the %d bytes left", n, len(body)-off)
	}
	if n > 0 {
		c.Groups = make([]Group, n)
	}
	names := make(map[string]uint32, n)
	for i := range c.Groups {
		g := &c.Groups[i]
		if err := decodeGroup(file, body, off, version, g); err != nil {
			return nil, err
		}
		switch {
		case i > 0 && g.ID <= c.Groups[i-1].ID:
			return nil, corrupt.New(file, int64(off), "group id %d not above %d", g.ID, c.Groups[i-1].ID)
		case g.ID >= c.NextGroupID:
			return nil, corrupt.New(file, int64(off), "group id %d not below the next group id %d", g.ID, c.NextGroupID)
		}
		if other, dup := names[g.Name]; dup {
			return nil, corrupt.New(file, int64(off+groupFixedLen), "group %d has the name %q of group %d", g.ID, g.Name, other)
		}
		if g.ID != 0 {
			names[g.Name] = g.ID
		}
		off += groupFixedLen + len(g.Name) + len(g.DeadLetter)
		if version >= 2 {
			off += 4 + deliveryLen*len(g.Deliveries)
		}
		if version >= 3 {
			off += 2 + len(g.Filter)
		}
		if version >= 4 {
			off += 4 + waitingLen*len(g.Waiting)
		}
		if version >= 5 {
			off += optionsLen(g)
		}
	}
	if off != len(body) {
		return nil, corrupt.New(file, int64(off), "%d trailing bytes", len(body)-off)
	}
	if version == catalogFilteredVersion && !catalogFiltered(c) {
		return nil, corrupt.New(file, versionOffset, "version 3 catalog without a filter")
	}
	if version == catalogWaitingVersion && !catalogWaiting(c) {
		return nil, corrupt.New(file, versionOffset, "version 4 catalog without a waiting event")
	}
	if version >= 5 && !catalogOptions(c) {
		return nil, corrupt.New(file, versionOffset, "version 5 catalog without a take option")
	}
	return c, nil
}

// decodeGroup decodes into g the entry at body[off:], checking its fields
// on their own; the caller checks its place in the list.
func decodeGroup(file string, body []byte, off int, version uint16, g *Group) error {
	be := binary.BigEndian
	e := body[off:]
	if len(e) < groupFixedLen {
		return corrupt.New(file, int64(off), "group entry truncated")
	}
	at := func(field int) int64 { return int64(off + field) }
	g.ID = be.Uint32(e)
	g.Since = be.Uint64(e[groupOffSince:])
	capacity := be.Uint64(e[groupOffCapacity:])
	if capacity < 1 || capacity > maxCapacity {
		return corrupt.New(file, at(groupOffCapacity), "group %d capacity %d out of range", g.ID, capacity)
	}
	g.Capacity = int(capacity)
	g.MaxDeliveries = be.Uint32(e[groupOffMaxDeliveries:])
	if g.Policy = e[groupOffPolicy]; g.Policy > maxPolicy {
		return corrupt.New(file, at(groupOffPolicy), "group %d policy %d unknown", g.ID, g.Policy)
	}
	a, b := int(e[groupOffNameLen]), int(e[groupOffDeadLetterLen])
	switch {
	case g.ID == 0 && a != 0:
		return corrupt.New(file, at(groupOffNameLen), "the unnamed group 0 has a name of %d bytes", a)
	case g.ID != 0 && (a == 0 || a > MaxGroupNameLen):
		return corrupt.New(file, at(groupOffNameLen), "group %d name length %d out of range", g.ID, a)
	case b > MaxGroupNameLen:
		return corrupt.New(file, at(groupOffDeadLetterLen), "group %d dead-letter length %d out of range", g.ID, b)
	case version < 2 && e[groupOffFlags] != 0:
		return corrupt.New(file, at(groupOffFlags), "group %d reserved byte %#02x not zero", g.ID, e[groupOffFlags])
	case e[groupOffFlags]&^groupFlagDeadLetter != 0:
		return corrupt.New(file, at(groupOffFlags), "group %d flags %#02x unknown", g.ID, e[groupOffFlags])
	case len(e)-groupFixedLen < a+b:
		return corrupt.New(file, int64(off+groupFixedLen), "group %d names truncated: %d bytes, want %d", g.ID, len(e)-groupFixedLen, a+b)
	}
	g.DeadLetterGroup = e[groupOffFlags]&groupFlagDeadLetter != 0
	g.Name = string(e[groupFixedLen : groupFixedLen+a])
	g.DeadLetter = string(e[groupFixedLen+a : groupFixedLen+a+b])
	if version < 2 {
		return nil
	}
	dOff := groupFixedLen + a + b
	if len(e)-dOff < 4 {
		return corrupt.New(file, int64(off+dOff), "group %d delivery count truncated", g.ID)
	}
	n := be.Uint32(e[dOff:])
	d := e[dOff+4:]
	if uint64(n) > uint64(len(d))/deliveryLen {
		return corrupt.New(file, int64(off+dOff), "group %d delivery count %d exceeds the %d bytes left", g.ID, n, len(d))
	}
	if n > 0 {
		g.Deliveries = make([]Delivery, n)
	}
	for i := range g.Deliveries {
		x := &g.Deliveries[i]
		x.Pointer, x.Count = be.Uint64(d[deliveryLen*i:]), be.Uint32(d[deliveryLen*i+8:])
		at := int64(off + dOff + 4 + deliveryLen*i)
		switch {
		case x.Pointer == 0:
			return corrupt.New(file, at, "group %d delivery of pointer 0", g.ID)
		case x.Count == 0:
			return corrupt.New(file, at+8, "group %d delivery count 0", g.ID)
		case i > 0 && x.Pointer <= g.Deliveries[i-1].Pointer:
			return corrupt.New(file, at, "group %d delivery pointers not strictly ascending", g.ID)
		}
	}
	if version < 3 {
		return nil
	}
	fOff := dOff + 4 + deliveryLen*int(n)
	if err := decodeFilter(file, e, off, fOff, g); err != nil || version < 4 {
		return err
	}
	wOff := fOff + 2 + len(g.Filter)
	if err := decodeWaiting(file, e, off, wOff, g); err != nil || version < 5 {
		return err
	}
	return decodeOptions(file, e, off, wOff+4+waitingLen*len(g.Waiting), g)
}

// decodeWaiting decodes the waiting events of a version 4 entry (e, at
// offset off of the body) that start at e[wOff:].
func decodeWaiting(file string, e []byte, off, wOff int, g *Group) error {
	if len(e)-wOff < 4 {
		return corrupt.New(file, int64(off+wOff), "group %d waiting count truncated", g.ID)
	}
	n := binary.BigEndian.Uint32(e[wOff:])
	w := e[wOff+4:]
	if uint64(n) > uint64(len(w))/waitingLen {
		return corrupt.New(file, int64(off+wOff), "group %d waiting count %d exceeds the %d bytes left", g.ID, n, len(w))
	}
	if n > 0 {
		g.Waiting = make([]Waiting, n)
	}
	for i := range g.Waiting {
		x := &g.Waiting[i]
		due := binary.BigEndian.Uint64(w[waitingLen*i+8:])
		x.Pointer, x.Due = binary.BigEndian.Uint64(w[waitingLen*i:]), int64(due)
		at := int64(off + wOff + 4 + waitingLen*i)
		switch {
		case x.Pointer == 0:
			return corrupt.New(file, at, "group %d waiting event of pointer 0", g.ID)
		case due == 0 || due > math.MaxInt64:
			return corrupt.New(file, at+8, "group %d waiting due time %d out of range", g.ID, due)
		case i > 0 && x.Pointer <= g.Waiting[i-1].Pointer:
			return corrupt.New(file, at, "group %d waiting pointers not strictly ascending", g.ID)
		}
	}
	return nil
}

// decodeFilter decodes the filter of a version 3 entry (e, at offset off
// of the body) that starts at e[fOff:].
func decodeFilter(file string, e []byte, off, fOff int, g *Group) error {
	if len(e)-fOff < 2 {
		return corrupt.New(file, int64(off+fOff), "group %d filter length truncated", g.ID)
	}
	n := int(binary.BigEndian.Uint16(e[fOff:]))
	switch {
	case n > maxFilterLen:
		return corrupt.New(file, int64(off+fOff), "group %d filter of %d bytes, limit %d", g.ID, n, maxFilterLen)
	case len(e)-fOff-2 < n:
		return corrupt.New(file, int64(off+fOff), "group %d filter truncated", g.ID)
	}
	g.Filter = string(e[fOff+2 : fOff+2+n])
	return nil
}

// validateCatalog reports why c cannot be encoded into a groups file that
// DecodeCatalog accepts, or nil.
func validateCatalog(c *Catalog) error {
	if c == nil {
		return errors.New("nil catalog")
	}
	if uint64(len(c.Groups)) > math.MaxUint32 {
		return fmt.Errorf("%d groups", len(c.Groups))
	}
	names := make(map[string]uint32, len(c.Groups))
	for i := range c.Groups {
		g := &c.Groups[i]
		switch {
		case i > 0 && g.ID <= c.Groups[i-1].ID:
			return fmt.Errorf("group ids not strictly ascending: %d after %d", g.ID, c.Groups[i-1].ID)
		case g.ID >= c.NextGroupID:
			return fmt.Errorf("group id %d not below the next group id %d", g.ID, c.NextGroupID)
		case g.ID == 0 && g.Name != "":
			return fmt.Errorf("the unnamed group 0 has the name %q", g.Name)
		case g.ID != 0 && (g.Name == "" || len(g.Name) > MaxGroupNameLen):
			return fmt.Errorf("group %d: name of %d bytes, want 1 to %d", g.ID, len(g.Name), MaxGroupNameLen)
		case len(g.DeadLetter) > MaxGroupNameLen:
			return fmt.Errorf("group %d: dead letter of %d bytes, want at most %d", g.ID, len(g.DeadLetter), MaxGroupNameLen)
		case g.Capacity < 1 || g.Capacity > maxCapacity:
			return fmt.Errorf("group %d: capacity %d out of range", g.ID, g.Capacity)
		case g.Policy > maxPolicy:
			return fmt.Errorf("group %d: unknown policy %d", g.ID, g.Policy)
		case len(g.Filter) > maxFilterLen:
			return fmt.Errorf("group %d: filter of %d bytes, want at most %d", g.ID, len(g.Filter), maxFilterLen)
		case uint64(len(g.Deliveries)) > math.MaxUint32:
			return fmt.Errorf("group %d: %d delivery counts", g.ID, len(g.Deliveries))
		}
		for j, d := range g.Deliveries {
			if d.Pointer == 0 || d.Count == 0 || (j > 0 && d.Pointer <= g.Deliveries[j-1].Pointer) {
				return fmt.Errorf("group %d: delivery count %d (pointer %#x, count %d) is zero or out of order", g.ID, j, d.Pointer, d.Count)
			}
		}
		if err := validateWaiting(g); err != nil {
			return err
		}
		if err := validateOptions(g); err != nil {
			return err
		}
		if other, dup := names[g.Name]; dup {
			return fmt.Errorf("groups %d and %d are both named %q", other, g.ID, g.Name)
		}
		if g.ID != 0 {
			names[g.Name] = g.ID
		}
	}
	return nil
}

// validateWaiting reports why g's waiting events cannot be encoded, or
// nil.
func validateWaiting(g *Group) error {
	if uint64(len(g.Waiting)) > math.MaxUint32 {
		return fmt.Errorf("group %d: %d waiting events", g.ID, len(g.Waiting))
	}
	for j, w := range g.Waiting {
		if w.Pointer == 0 || w.Due <= 0 || (j > 0 && w.Pointer <= g.Waiting[j-1].Pointer) {
			return fmt.Errorf("group %d: waiting event %d (pointer %#x, due %d) is zero or out of order", g.ID, j, w.Pointer, w.Due)
		}
	}
	return nil
}
