package logfile

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// A group's take options in a groups record of type 17 (typeOptionGroups;
// format.go has the layout): after the filter of a type-14 entry, each
// entry holds
//
//	uvarint order key len (<= MaxOrderKeyLen), order key bytes
//	uvarint retry delay count (<= MaxRetryDelays), that many uvarint delays in nanoseconds
//	uvarint lease timeout in nanoseconds
//	uvarint expire-after in nanoseconds
//
// every duration at most math.MaxInt64 (0 = none). A type-17 record lists
// one group at least with an option; one without is written as type 7 or
// 14, which older builds read.

// typeOfLevel is the on-disk type of a groups record of level.
func typeOfLevel(level groupsLevel) RecordType {
	switch level {
	case filteredGroups:
		return typeFilteredGroups
	case optionGroups:
		return typeOptionGroups
	}
	return RecordGroups
}

// optionsSize is the size of g's take options in a type-17 entry.
func optionsSize(g *GroupInfo) int {
	n := uvarintLen(uint64(len(g.OrderKey))) + len(g.OrderKey) + uvarintLen(uint64(len(g.RetryDelays)))
	for _, d := range g.RetryDelays {
		n += uvarintLen(uint64(d))
	}
	return n + uvarintLen(uint64(g.LeaseTimeout)) + uvarintLen(uint64(g.ExpireAfter))
}

// checkOptions returns ErrInvalidRecord for take options that would not
// decode: an order key over MaxOrderKeyLen bytes, more than MaxRetryDelays
// delays, or a negative duration.
func checkOptions(g *GroupInfo) error {
	switch {
	case len(g.OrderKey) > MaxOrderKeyLen:
		return fmt.Errorf("%w: group %d: order key of %d bytes, limit %d", ErrInvalidRecord, g.ID, len(g.OrderKey), MaxOrderKeyLen)
	case len(g.RetryDelays) > MaxRetryDelays:
		return fmt.Errorf("%w: group %d: %d retry delays, limit %d", ErrInvalidRecord, g.ID, len(g.RetryDelays), MaxRetryDelays)
	case g.LeaseTimeout < 0 || g.ExpireAfter < 0:
		return fmt.Errorf("%w: group %d: lease timeout %v or expire-after %v negative", ErrInvalidRecord, g.ID, g.LeaseTimeout, g.ExpireAfter)
	}
	for i, d := range g.RetryDelays {
		if d < 0 {
			return fmt.Errorf("%w: group %d: retry delay %d is %v", ErrInvalidRecord, g.ID, i, d)
		}
	}
	return nil
}

// appendOptions appends g's take options (checked by checkOptions).
func appendOptions(dst []byte, g *GroupInfo) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(g.OrderKey)))
	dst = append(dst, g.OrderKey...)
	dst = binary.AppendUvarint(dst, uint64(len(g.RetryDelays)))
	for _, d := range g.RetryDelays {
		dst = binary.AppendUvarint(dst, uint64(d))
	}
	dst = binary.AppendUvarint(dst, uint64(g.LeaseTimeout))
	return binary.AppendUvarint(dst, uint64(g.ExpireAfter))
}

// decodeOptions decodes the take options that end a type-17 entry from p
// into g and returns the rest of p, or a reason.
func decodeOptions(p []byte, g *GroupInfo) ([]byte, string) {
	key, p, ok := readBytes(p)
	switch {
	case !ok:
		return p, "group order key overruns payload"
	case len(key) > MaxOrderKeyLen:
		return p, "group order key too long"
	}
	n, p, ok := readUvarint(p)
	switch {
	case !ok:
		return p, "bad retry delay count"
	case n > MaxRetryDelays:
		return p, "too many retry delays"
	case n > uint64(len(p)): // a delay takes one byte at least
		return p, "retry delay count overruns payload"
	}
	var delays []time.Duration
	if n > 0 {
		delays = make([]time.Duration, n)
	}
	for i := range delays {
		if delays[i], p, ok = readDuration(p); !ok {
			return p, "bad retry delay"
		}
	}
	if g.LeaseTimeout, p, ok = readDuration(p); !ok {
		return p, "bad lease timeout"
	}
	if g.ExpireAfter, p, ok = readDuration(p); !ok {
		return p, "bad expire-after"
	}
	g.OrderKey, g.RetryDelays = string(key), delays
	return p, ""
}

// readDuration reads a minimally encoded uvarint of nanoseconds, at most
// math.MaxInt64, from the start of b.
func readDuration(b []byte) (time.Duration, []byte, bool) {
	x, rest, ok := readUvarint(b)
	if !ok || x > math.MaxInt64 {
		return 0, b, false
	}
	return time.Duration(x), rest, true
}
