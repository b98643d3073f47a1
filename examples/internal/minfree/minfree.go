// Package minfree is the examples' -min-free flag: the free space a
// channel keeps on the disk of its data dir (channel.Config.
// MinimumRequiredSpace; puts are refused below it), in bytes or with a
// unit.
//
// Units follow dd(1): KB, MB, GB and TB are powers of 1000; K, M, G, T
// and KiB, MiB, GiB, TiB are powers of 1024; case does not matter. So
// 64MB is 64,000,000 bytes and 64M or 64MiB is 67,108,864. 0 means no
// minimum: puts are refused only when the disk is full (the channel's
// space reserve still lets takes commit).
//
// Waiter (waiter.go) is what a source does with a put refused below it:
// wait, ask for a checkpoint, and retry.
package minfree

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/flumego/filechannel/channel"
)

// Bytes is a -min-free value in bytes, a flag.Value. Its zero value is no
// minimum.
type Bytes int64

// Default is the flag's default: the channel's, 500 MiB.
const Default Bytes = channel.DefaultMinimumRequiredSpace

// Usage is the start of the flag's usage line; each example says what is
// refused below it.
// (The back-quoted word names the value in -h: "-min-free bytes".)
const Usage = "`bytes` to keep free on the data dir's disk, or a size with a unit (64MB, 64MiB, 1GiB; 0 = none)"

var units = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
}

var errSyntax = errors.New("want bytes, or a whole number with a unit: 64MB (64,000,000), 64MiB or 64M (64 × 2^20), 1GiB; 0 = no minimum")

// Parse reads a size: digits, then an optional unit.
func Parse(s string) (Bytes, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if i < 0 {
		i = len(s)
	}
	mult, ok := units[strings.ToLower(strings.TrimSpace(s[i:]))]
	if i == 0 || !ok {
		return 0, errSyntax
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%s is too large", s)
	}
	return Bytes(n * mult), nil
}

// Set is flag.Value's Set.
func (b *Bytes) Set(s string) error {
	n, err := Parse(s)
	if err != nil {
		return err
	}
	*b = n
	return nil
}

// String formats b in the largest unit that divides it: "500MiB",
// "64MB", "1536", "0".
func (b Bytes) String() string {
	for _, u := range []struct {
		name string
		n    int64
	}{{"TiB", 1 << 40}, {"TB", 1e12}, {"GiB", 1 << 30}, {"GB", 1e9}, {"MiB", 1 << 20}, {"MB", 1e6}, {"KiB", 1 << 10}, {"KB", 1e3}} {
		if b != 0 && int64(b)%u.n == 0 {
			return strconv.FormatInt(int64(b)/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// Config is b as channel.Config.MinimumRequiredSpace: 0 there is the
// default, so no minimum is -1.
func (b Bytes) Config() int64 {
	if b == 0 {
		return -1
	}
	return int64(b)
}
