package checkpoint

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/logfile"
)

// A group's take options in a version 5 catalog entry, after its waiting
// events (all integers big-endian):
//
//	2      order key length k (<= logfile.MaxOrderKeyLen, 256)
//	k      order key bytes
//	4      retry delay count n (<= logfile.MaxRetryDelays, 1024)
//	8 x n  retry delays in nanoseconds, each <= 2^63-1
//	8      lease timeout in nanoseconds, <= 2^63-1
//	8      expire-after in nanoseconds, <= 2^63-1
//
// A version 5 catalog lists one group at least with an option.

// optionsLen is the size of g's take options in a version 5 entry.
func optionsLen(g *Group) int { return 2 + len(g.OrderKey) + 4 + 8*len(g.RetryDelays) + 16 }

// appendOptions appends g's take options (checked by validateOptions).
func appendOptions(dst []byte, g *Group) []byte {
	be := binary.BigEndian
	dst = be.AppendUint16(dst, uint16(len(g.OrderKey)))
	dst = append(dst, g.OrderKey...)
	dst = be.AppendUint32(dst, uint32(len(g.RetryDelays)))
	for _, d := range g.RetryDelays {
		dst = be.AppendUint64(dst, uint64(d))
	}
	dst = be.AppendUint64(dst, uint64(g.LeaseTimeout))
	return be.AppendUint64(dst, uint64(g.ExpireAfter))
}

// validateOptions reports why g's take options cannot be encoded, or nil.
func validateOptions(g *Group) error {
	switch {
	case len(g.OrderKey) > logfile.MaxOrderKeyLen:
		return fmt.Errorf("group %d: order key of %d bytes, want at most %d", g.ID, len(g.OrderKey), logfile.MaxOrderKeyLen)
	case len(g.RetryDelays) > logfile.MaxRetryDelays:
		return fmt.Errorf("group %d: %d retry delays, want at most %d", g.ID, len(g.RetryDelays), logfile.MaxRetryDelays)
	case g.LeaseTimeout < 0 || g.ExpireAfter < 0:
		return fmt.Errorf("group %d: lease timeout %v or expire-after %v negative", g.ID, g.LeaseTimeout, g.ExpireAfter)
	}
	for i, d := range g.RetryDelays {
		if d < 0 {
			return fmt.Errorf("group %d: retry delay %d is %v", g.ID, i, d)
		}
	}
	return nil
}

// decodeOptions decodes the take options of a version 5 entry (e, at
// offset off of the body) that start at e[oOff:].
func decodeOptions(file string, e []byte, off, oOff int, g *Group) error {
	be := binary.BigEndian
	at := func(o int) int64 { return int64(off + o) }
	if len(e)-oOff < 2 {
		return corrupt.New(file, at(oOff), "group %d order key length truncated", g.ID)
	}
	k := int(be.Uint16(e[oOff:]))
	switch {
	case k > logfile.MaxOrderKeyLen:
		return corrupt.New(file, at(oOff), "group %d order key of %d bytes, limit %d", g.ID, k, logfile.MaxOrderKeyLen)
	case len(e)-oOff-2 < k+4:
		return corrupt.New(file, at(oOff), "group %d order key or retry delay count truncated", g.ID)
	}
	g.OrderKey = string(e[oOff+2 : oOff+2+k])
	dOff := oOff + 2 + k
	n := be.Uint32(e[dOff:])
	switch {
	case n > logfile.MaxRetryDelays:
		return corrupt.New(file, at(dOff), "group %d: %d retry delays, limit %d", g.ID, n, logfile.MaxRetryDelays)
	case len(e)-dOff-4 < 8*int(n)+16:
		return corrupt.New(file, at(dOff), "group %d retry delays, lease timeout or expire-after truncated", g.ID)
	}
	if n > 0 {
		g.RetryDelays = make([]time.Duration, n)
	}
	ds := make([]time.Duration, n+2)
	for i := range ds {
		x := be.Uint64(e[dOff+4+8*i:])
		if x > math.MaxInt64 {
			return corrupt.New(file, at(dOff+4+8*i), "group %d duration %d out of range", g.ID, x)
		}
		ds[i] = time.Duration(x)
	}
	copy(g.RetryDelays, ds)
	g.LeaseTimeout, g.ExpireAfter = ds[n], ds[n+1]
	return nil
}
