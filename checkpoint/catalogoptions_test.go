package checkpoint

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/logfile"
)

// optionsCatalog is sampleCatalog with take options on group 2, at their
// bounds, and a filter and waiting events on group 4.
func optionsCatalog() *Catalog {
	c := sampleCatalog()
	g := &c.Groups[1]
	g.OrderKey = strings.Repeat("k", logfile.MaxOrderKeyLen)
	g.RetryDelays = []time.Duration{0, time.Second, math.MaxInt64}
	g.LeaseTimeout, g.ExpireAfter = time.Minute, math.MaxInt64
	c.Groups[2].Filter = "true"
	c.Groups[2].Waiting = []Waiting{{Pointer: 9, Due: 9}}
	return c
}

// TestCatalogOptionsRoundTrip: a catalog in which a group has a take
// option (each alone too) is version 5 and decodes to what was encoded;
// one without stays version 4 or below (TestCatalogWaitingRoundTrip).
func TestCatalogOptionsRoundTrip(t *testing.T) {
	one := func(edit func(*Group)) *Catalog {
		c := sampleCatalog()
		edit(&c.Groups[2])
		return c
	}
	for name, c := range map[string]*Catalog{
		"bounds":        optionsCatalog(),
		"order_key":     one(func(g *Group) { g.OrderKey = "customer" }),
		"retry_delays":  one(func(g *Group) { g.RetryDelays = make([]time.Duration, logfile.MaxRetryDelays) }),
		"lease_timeout": one(func(g *Group) { g.LeaseTimeout = time.Second }),
		"expire_after":  one(func(g *Group) { g.ExpireAfter = time.Hour }),
	} {
		b := EncodeCatalog(c)
		if v := binary.BigEndian.Uint16(b[versionOffset:]); v != 5 {
			t.Errorf("%s: version %d, want 5", name, v)
		}
		got, err := DecodeCatalog(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("%s: decoded %+v, want %+v", name, got, c)
		}
	}
}

// TestCatalogOptionsRefused: validateCatalog refuses what DecodeCatalog
// would, and DecodeCatalog reads every bad field as corrupt (never a
// panic): a version 5 catalog without an option, a field over its bound,
// a duration above 2^63-1, every truncation.
func TestCatalogOptionsRefused(t *testing.T) {
	for name, edit := range map[string]func(*Group){
		"order_key_too_long": func(g *Group) { g.OrderKey = strings.Repeat("k", logfile.MaxOrderKeyLen+1) },
		"too_many_delays":    func(g *Group) { g.RetryDelays = make([]time.Duration, logfile.MaxRetryDelays+1) },
		"negative_delay":     func(g *Group) { g.RetryDelays = []time.Duration{-1} },
		"negative_lease":     func(g *Group) { g.LeaseTimeout = -1 },
		"negative_expire":    func(g *Group) { g.ExpireAfter = -1 },
	} {
		c := sampleCatalog()
		edit(&c.Groups[2])
		if err := validateCatalog(c); err == nil {
			t.Errorf("%s: validateCatalog took it", name)
		}
	}
	// The last entry's options: key "k", one delay, lease, expire-after,
	// then the CRC.
	c := sampleCatalog()
	c.Groups[2].OrderKey, c.Groups[2].RetryDelays = "k", []time.Duration{1}
	b := EncodeCatalog(c)
	end := len(b) - crcLen
	opt := end - optionsLen(&c.Groups[2])
	for name, edit := range map[string]func([]byte) []byte{
		"no_option":        func([]byte) []byte { return leaseOnlyCleared() },
		"key_too_long":     func(b []byte) []byte { return put16(opt, logfile.MaxOrderKeyLen+1)(b) },
		"key_overrun":      func(b []byte) []byte { return put16(opt, 200)(b) },
		"too_many_delays":  func(b []byte) []byte { return put32(opt+3, logfile.MaxRetryDelays+1)(b) },
		"delays_overrun":   func(b []byte) []byte { return put32(opt+3, 5)(b) },
		"delay_over_int64": func(b []byte) []byte { return putByte(opt+7, 0x80)(b) },
		"lease_over_int64": func(b []byte) []byte { return putByte(end-16, 0x80)(b) },
		"expire_over":      func(b []byte) []byte { return putByte(end-8, 0xFF)(b) },
	} {
		if _, err := DecodeCatalog(edit(append([]byte(nil), b...))); !errors.Is(err, corrupt.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	for n := opt; n < end; n++ {
		if _, err := DecodeCatalog(resum(append(append([]byte(nil), b[:n]...), 0, 0, 0, 0))); !errors.Is(err, corrupt.ErrCorrupt) {
			t.Errorf("cut at %d: %v, want ErrCorrupt", n, err)
		}
	}
}

// leaseOnlyCleared is a version 5 catalog whose one option (a lease
// timeout of 1ns) is cleared in its bytes: a version 5 catalog without an
// option.
func leaseOnlyCleared() []byte {
	c := sampleCatalog()
	c.Groups[2].LeaseTimeout = 1
	b := EncodeCatalog(c)
	b[len(b)-crcLen-9] = 0
	return resum(b)
}
