package logfile

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"
)

// The records of format version 3 for consumer groups (format.go has the
// layouts): a take by a named group (on-disk type 6, Record.Group), the
// groups catalog (RecordGroups) and the groups a put transaction skips
// (RecordSkip). Encoders check what decoders check, so that the writer
// never produces a record that reads back as corrupt.

// GroupInfo is one consumer group as a groups record (RecordGroups) lists it.
type GroupInfo struct {
	ID            uint32 // 0: the unnamed group
	Name          string // "" for ID 0
	Since         uint64 // write-order id when the group was created: it receives the put commits after it
	Capacity      uint64
	Policy        uint8 // 0 block, 1 drop oldest, 2 drop newest
	MaxDeliveries uint32
	DeadLetter    string
	// DeadLetterGroup: a group that receives dead letters, not puts
	// (version 4; encoded as 0x80 in the policy byte).
	DeadLetterGroup bool
	// Filter is the group's filter expression ("" = every event); a
	// groups record with one is written as type 14, which builds before
	// filters refuse as a newer release's record.
	Filter string
	// The group's take options (channel.GroupConfig's fields of the same
	// names): a groups record in which a group has one is written as type
	// 17 (typeOptionGroups), which builds before it refuse as a newer
	// release's record. OrderKey is at most MaxOrderKeyLen bytes;
	// RetryDelays at most MaxRetryDelays delays; no duration is negative.
	OrderKey     string
	RetryDelays  []time.Duration
	LeaseTimeout time.Duration
	ExpireAfter  time.Duration
}

// HasOptions reports whether g has a take option (OrderKey, RetryDelays,
// LeaseTimeout or ExpireAfter): a groups record or a checkpoint catalog
// that lists it is written in the format that stores them.
func (g *GroupInfo) HasOptions() bool {
	return g.OrderKey != "" || len(g.RetryDelays) > 0 || g.LeaseTimeout != 0 || g.ExpireAfter != 0
}

// MaxOrderKeyLen is the longest OrderKey (a header name), in bytes, of a
// group in a groups record. Part of the on-disk format.
const MaxOrderKeyLen = 256

// MaxRetryDelays is the most RetryDelays of a group in a groups record.
// Part of the on-disk format.
const MaxRetryDelays = 1024

// groupsLevel says which fields the entries of a groups record carry,
// from its on-disk type: 7 none of the two below, 14 the filter, 17 the
// filter and the take options.
type groupsLevel uint8

const (
	plainGroups    groupsLevel = iota // type 7
	filteredGroups                    // type 14: each entry ends with its filter
	optionGroups                      // type 17: then with its take options
)

// levelOf is the level a groups record listing cat is written at: the
// oldest that holds every field cat uses.
func levelOf(cat []GroupInfo) groupsLevel {
	if slices.ContainsFunc(cat, func(g GroupInfo) bool { return g.HasOptions() }) {
		return optionGroups
	}
	if filtered(cat) {
		return filteredGroups
	}
	return plainGroups
}

// MaxFilterLen is the longest filter expression, in bytes, of a group in
// a groups record. Part of the on-disk format.
const MaxFilterLen = 4096

// filtered reports whether a group of cat has a filter: its groups record
// is then written as type 14, with each entry's filter.
func filtered(cat []GroupInfo) bool {
	for i := range cat {
		if cat[i].Filter != "" {
			return true
		}
	}
	return false
}

// deadLetterFlag marks a dead-letter group in a groups record's policy
// byte. Part of the on-disk format.
const deadLetterFlag = 0x80

// MaxGroupNameLen is the longest name, in bytes, of a consumer group and
// of its dead-letter group in a groups record. Part of the on-disk format.
const MaxGroupNameLen = 64

// maxGroupPolicy is the highest GroupInfo.Policy. Part of the on-disk
// format.
const maxGroupPolicy = 2

// minGroupEntrySize is the fewest bytes an entry of a groups record takes:
// one per uvarint (id, name length, since, capacity, max deliveries,
// dead-letter length) and the policy byte.
const minGroupEntrySize = 7

// groupsSize is the size of a groups record's body.
func groupsSize(r *Record) int {
	n := uvarintLen(uint64(r.NextGroupID)) + uvarintLen(uint64(len(r.Catalog)))
	level := levelOf(r.Catalog)
	for i := range r.Catalog {
		g := &r.Catalog[i]
		if level >= filteredGroups {
			n += uvarintLen(uint64(len(g.Filter))) + len(g.Filter)
		}
		if level >= optionGroups {
			n += optionsSize(g)
		}
		n += uvarintLen(uint64(g.ID)) +
			uvarintLen(uint64(len(g.Name))) + len(g.Name) +
			uvarintLen(g.Since) + uvarintLen(g.Capacity) + 1 +
			uvarintLen(uint64(g.MaxDeliveries)) +
			uvarintLen(uint64(len(g.DeadLetter))) + len(g.DeadLetter)
	}
	return n
}

// skipSize is the size of a skip record's body.
func skipSize(ids []uint32) int {
	n := uvarintLen(uint64(len(ids)))
	for _, id := range ids {
		n += uvarintLen(uint64(id))
	}
	return n
}

// checkGroups returns ErrInvalidRecord for a groups record that would not
// decode: a transaction id, ids not strictly increasing or not below
// NextGroupID, a name too long or an unknown policy.
func checkGroups(r *Record) error {
	if r.TxID != 0 {
		return fmt.Errorf("%w: groups record with transaction id %d", ErrInvalidRecord, r.TxID)
	}
	for i := range r.Catalog {
		g := &r.Catalog[i]
		switch {
		case i > 0 && g.ID <= r.Catalog[i-1].ID:
			return fmt.Errorf("%w: groups record: group id %d after %d", ErrInvalidRecord, g.ID, r.Catalog[i-1].ID)
		case g.ID >= r.NextGroupID:
			return fmt.Errorf("%w: groups record: group id %d not below the next group id %d", ErrInvalidRecord, g.ID, r.NextGroupID)
		case len(g.Name) > MaxGroupNameLen || len(g.DeadLetter) > MaxGroupNameLen:
			return fmt.Errorf("%w: group %d: name of %d bytes or dead-letter name of %d, limit %d", ErrInvalidRecord, g.ID, len(g.Name), len(g.DeadLetter), MaxGroupNameLen)
		case g.Policy > maxGroupPolicy:
			return fmt.Errorf("%w: group %d: policy %d", ErrInvalidRecord, g.ID, g.Policy)
		case len(g.Filter) > MaxFilterLen:
			return fmt.Errorf("%w: group %d: filter of %d bytes, limit %d", ErrInvalidRecord, g.ID, len(g.Filter), MaxFilterLen)
		}
		if err := checkOptions(g); err != nil {
			return err
		}
	}
	return nil
}

// checkSkip returns ErrInvalidRecord for skip ids that would not decode:
// none, or not strictly increasing.
func checkSkip(ids []uint32) error {
	if len(ids) == 0 {
		return fmt.Errorf("%w: skip record without groups", ErrInvalidRecord)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			return fmt.Errorf("%w: skip record: group id %d after %d", ErrInvalidRecord, ids[i], ids[i-1])
		}
	}
	return nil
}

// appendGroups appends a groups record's body (checked by checkGroups).
func appendGroups(dst []byte, r *Record) []byte {
	dst = binary.AppendUvarint(dst, uint64(r.NextGroupID))
	dst = binary.AppendUvarint(dst, uint64(len(r.Catalog)))
	level := levelOf(r.Catalog)
	for i := range r.Catalog {
		g := &r.Catalog[i]
		dst = binary.AppendUvarint(dst, uint64(g.ID))
		dst = binary.AppendUvarint(dst, uint64(len(g.Name)))
		dst = append(dst, g.Name...)
		dst = binary.AppendUvarint(dst, g.Since)
		dst = binary.AppendUvarint(dst, g.Capacity)
		policy := g.Policy
		if g.DeadLetterGroup {
			policy |= deadLetterFlag
		}
		dst = append(dst, policy)
		dst = binary.AppendUvarint(dst, uint64(g.MaxDeliveries))
		dst = binary.AppendUvarint(dst, uint64(len(g.DeadLetter)))
		dst = append(dst, g.DeadLetter...)
		if level >= filteredGroups {
			dst = binary.AppendUvarint(dst, uint64(len(g.Filter)))
			dst = append(dst, g.Filter...)
		}
		if level >= optionGroups {
			dst = appendOptions(dst, g)
		}
	}
	return dst
}

// appendSkip appends a skip record's body (checked by checkSkip).
func appendSkip(dst []byte, ids []uint32) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	for _, id := range ids {
		dst = binary.AppendUvarint(dst, uint64(id))
	}
	return dst
}

// decodeGroupTake decodes the body of a group take (type 6) into r, as a
// RecordTake with its Group.
func decodeGroupTake(p []byte, r *Record, s *scratch) string {
	g, p, ok := readUint32(p)
	switch {
	case !ok:
		return "bad group id"
	case g == 0:
		return "group take of group 0"
	}
	r.Type, r.Group = RecordTake, g
	return decodeTake(p, r, s)
}

// decodeGroupsOf decodes the body of a groups record into r: type 7, type
// 14 (filteredGroups: each entry ends with its filter, and one at least is
// not empty) or type 17 (optionGroups: each entry ends with its filter and
// its take options, and one group at least has an option). Its Catalog is
// allocated (groups records are rare), growing with the entries read, not
// with the count the record claims.
func decodeGroupsOf(p []byte, r *Record, level groupsLevel) string {
	if r.TxID != 0 {
		return "groups record with a transaction id"
	}
	next, p, ok := readUint32(p)
	if !ok {
		return "bad next group id"
	}
	count, p, ok := readUvarint(p)
	if !ok {
		return "bad group count"
	}
	if count > uint64(len(p))/minGroupEntrySize {
		return "group count overruns payload"
	}
	r.NextGroupID = next
	if count == 0 {
		if len(p) != 0 {
			return "trailing bytes after groups"
		}
		return ""
	}
	cat := make([]GroupInfo, 0, min(count, 64))
	for i := uint64(0); i < count; i++ {
		var g GroupInfo
		var reason string
		if p, reason = decodeGroupEntry(p, &g, level); reason != "" {
			return reason
		}
		switch {
		case i > 0 && g.ID <= cat[i-1].ID:
			return "group ids not in increasing order"
		case g.ID >= next:
			return "group id not below the next group id"
		}
		cat = append(cat, g)
	}
	if len(p) != 0 {
		return "trailing bytes after groups"
	}
	if levelOf(cat) != level {
		return fmt.Sprintf("groups record of type %d without a field of that type (a filter, or a take option)", typeOfLevel(level))
	}
	r.Catalog = cat
	return ""
}

// decodeGroupEntry decodes one entry of a groups record of level from p
// into g and returns the rest of p, or a reason.
func decodeGroupEntry(p []byte, g *GroupInfo, level groupsLevel) ([]byte, string) {
	var name, dl, f []byte
	var ok bool
	if g.ID, p, ok = readUint32(p); !ok {
		return p, "bad group id"
	}
	if name, p, ok = readBytes(p); !ok {
		return p, "group name overruns payload"
	}
	if len(name) > MaxGroupNameLen {
		return p, "group name too long"
	}
	if g.Since, p, ok = readUvarint(p); !ok {
		return p, "bad group since"
	}
	if g.Capacity, p, ok = readUvarint(p); !ok {
		return p, "bad group capacity"
	}
	if len(p) == 0 {
		return p, "group policy overruns payload"
	}
	g.Policy, g.DeadLetterGroup, p = p[0]&^deadLetterFlag, p[0]&deadLetterFlag != 0, p[1:]
	if g.Policy > maxGroupPolicy {
		return p, "unknown group policy"
	}
	if g.MaxDeliveries, p, ok = readUint32(p); !ok {
		return p, "bad group max deliveries"
	}
	if dl, p, ok = readBytes(p); !ok {
		return p, "dead-letter name overruns payload"
	}
	if len(dl) > MaxGroupNameLen {
		return p, "dead-letter name too long"
	}
	if level >= filteredGroups {
		if f, p, ok = readBytes(p); !ok {
			return p, "group filter overruns payload"
		}
		if len(f) > MaxFilterLen {
			return p, "group filter too long"
		}
	}
	g.Name, g.DeadLetter, g.Filter = string(name), string(dl), string(f)
	if level >= optionGroups {
		return decodeOptions(p, g)
	}
	return p, ""
}

// rangesSize is the size of a filter skip record's ranges.
func rangesSize(rs []uint32) int {
	n := uvarintLen(uint64(len(rs) / 2))
	for _, x := range rs {
		n += uvarintLen(uint64(x))
	}
	return n
}

// checkRanges returns ErrInvalidRecord for filter skip or duplicate ranges that would
// not decode: none, odd, a count of 0, or ranges out of order or touching
// (the writer merges adjacent ones).
func checkRanges(rs []uint32) error {
	if len(rs) == 0 || len(rs)%2 != 0 {
		return fmt.Errorf("%w: filter skip record with %d range fields", ErrInvalidRecord, len(rs))
	}
	var end uint64
	for i := 0; i < len(rs); i += 2 {
		first, n := uint64(rs[i]), uint64(rs[i+1])
		if n == 0 || (i > 0 && first <= end) {
			return fmt.Errorf("%w: filter skip range [%d, +%d) after %d", ErrInvalidRecord, first, n, end)
		}
		end = first + n
	}
	return nil
}

// appendRanges appends a filter skip record's ranges (checked by
// checkRanges): uvarint pair count, then (first, count) uvarint pairs.
func appendRanges(dst []byte, rs []uint32) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(rs)/2))
	for _, x := range rs {
		dst = binary.AppendUvarint(dst, uint64(x))
	}
	return dst
}

// decodeFilterSkip decodes the body of a filter skip record into r: a
// group id, then at least one range (as checkRanges wants them).
func decodeFilterSkip(p []byte, r *Record) string {
	g, p, ok := readUint32(p)
	if !ok {
		return "bad group id"
	}
	rs, why := decodeRanges(p, "filter skip")
	if why != "" {
		return why
	}
	r.Group, r.Ranges = g, rs
	return ""
}

// decodeDuplicate decodes the body of a duplicate record into r: at least
// one range (as checkRanges wants them).
func decodeDuplicate(p []byte, r *Record) string {
	rs, why := decodeRanges(p, "duplicate")
	if why != "" {
		return why
	}
	r.Ranges = rs
	return ""
}

// decodeRanges decodes the ranges that end the body p of a filter skip or
// duplicate record (what names the record in its reasons).
func decodeRanges(p []byte, what string) ([]uint32, string) {
	n, p, ok := readUvarint(p)
	switch {
	case !ok:
		return nil, "bad range count"
	case n == 0:
		return nil, what + " record without ranges"
	case n > uint64(len(p))/2:
		return nil, "range count overruns payload"
	}
	rs := make([]uint32, 2*n)
	for i := range rs {
		if rs[i], p, ok = readUint32(p); !ok {
			return nil, "bad range"
		}
	}
	if len(p) != 0 {
		return nil, "trailing bytes after " + what
	}
	if checkRanges(rs) != nil {
		return nil, what + " ranges out of order, touching or empty"
	}
	return rs, ""
}

// decodeSkip decodes the body of a skip record into r, its Skip in s's
// allocation when s is not nil.
func decodeSkip(p []byte, r *Record, s *scratch) string {
	count, p, ok := readUvarint(p)
	switch {
	case !ok:
		return "bad skip count"
	case count == 0:
		return "skip record without groups"
	case count > uint64(len(p)): // a group id takes at least one byte
		return "skip count overruns payload"
	}
	var ids []uint32
	if s != nil {
		ids = slices.Grow(s.skip[:0], int(count))[:count]
		s.skip = ids
	} else {
		ids = make([]uint32, count)
	}
	for i := range ids {
		if ids[i], p, ok = readUint32(p); !ok {
			return "bad skip group id"
		}
		if i > 0 && ids[i] <= ids[i-1] {
			return "skip group ids not in increasing order"
		}
	}
	if len(p) != 0 {
		return "trailing bytes after skip"
	}
	r.Skip = ids
	return ""
}

// decodeGroupPointers decodes the body of a move record into r: a group
// id, then at least one pointer (in s's allocation when s is not nil).
func decodeGroupPointers(p []byte, r *Record, s *scratch) string {
	g, p, ok := readUint32(p)
	if !ok {
		return "bad group id"
	}
	r.Group = g
	if reason := decodeTake(p, r, s); reason != "" {
		return reason
	}
	if len(r.Pointers) == 0 {
		return r.Type.String() + " record without pointers"
	}
	return ""
}

// decodeDeliver decodes the body of a deliver record into r: a group id,
// then at least one (pointer, count >= 1) pair.
func decodeDeliver(p []byte, r *Record, s *scratch) string {
	n, p, bad := readGroupCount(p, r, "deliver")
	switch {
	case bad != "":
		return bad
	case n > uint64(len(p))/9: // a pointer and a one-byte count
		return "pointer count overruns payload"
	}
	ptrs := pointerSlice(s, n)
	counts := make([]uint32, n)
	for i := range ptrs {
		if len(p) < 8 {
			return "pointer overruns payload"
		}
		ptrs[i] = binary.BigEndian.Uint64(p)
		c, rest, ok := readUint32(p[8:])
		if !ok {
			return "bad delivery count"
		}
		if c == 0 {
			return "delivery count 0"
		}
		counts[i], p = c, rest
	}
	if len(p) != 0 {
		return "trailing bytes after deliver"
	}
	r.Pointers, r.Counts = ptrs, counts
	return ""
}

// readUint32 reads a minimally encoded uvarint that fits in 32 bits from
// the start of b.
func readUint32(b []byte) (uint32, []byte, bool) {
	x, rest, ok := readUvarint(b)
	if !ok || x > math.MaxUint32 {
		return 0, b, false
	}
	return uint32(x), rest, true
}

// appendRetry appends the body of retry record r: its group, then each
// pointer with its due time.
func appendRetry(dst []byte, r *Record) []byte {
	dst = binary.AppendUvarint(dst, uint64(r.Group))
	dst = binary.AppendUvarint(dst, uint64(len(r.Pointers)))
	for i, p := range r.Pointers {
		dst = binary.BigEndian.AppendUint64(dst, p)
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.Due[i]))
	}
	return dst
}

// decodeRetry decodes the body of a retry record into r: a group id, then
// n >= 1 pointers each with a due time >= 1.
func decodeRetry(p []byte, r *Record, s *scratch) string {
	n, p, bad := readGroupCount(p, r, "retry")
	switch {
	case bad != "":
		return bad
	case n != uint64(len(p))/16 || len(p)%16 != 0:
		return "pointer count does not match the payload"
	}
	ptrs := pointerSlice(s, n)
	due := make([]int64, n)
	for i := range ptrs {
		ptrs[i] = binary.BigEndian.Uint64(p)
		d := binary.BigEndian.Uint64(p[8:])
		if d == 0 || d > math.MaxInt64 {
			return "due time out of range"
		}
		due[i] = int64(d)
		p = p[16:]
	}
	r.Pointers, r.Due = ptrs, due
	return ""
}

// readGroupCount reads the start of a deliver or retry record's body (of
// type what): the group id, into r, and the pointer count n >= 1; bad is
// the reason it is corrupt ("" if it is not).
func readGroupCount(p []byte, r *Record, what string) (n uint64, rest []byte, bad string) {
	g, p, ok := readUint32(p)
	if !ok {
		return 0, p, "bad group id"
	}
	n, p, ok = readUvarint(p)
	switch {
	case !ok:
		return 0, p, "bad pointer count"
	case n == 0:
		return 0, p, what + " record without pointers"
	}
	r.Group = g
	return n, p, ""
}

// pointerSlice returns a slice of n pointers, s's reused one if s is not
// nil.
func pointerSlice(s *scratch, n uint64) []uint64 {
	if s == nil {
		return make([]uint64, n)
	}
	s.pointers = slices.Grow(s.pointers[:0], int(n))[:n]
	return s.pointers
}
