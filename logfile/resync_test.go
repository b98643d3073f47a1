package logfile

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/flumego/filechannel/internal/vfs"
)

// Work on damaged input is linear in its size (STYLE.md 17): after a torn
// record the scanner tries every following offset, and each must cost O(1)
// unless it passes the frame header checksum.

// resyncTrap is an 8-byte pattern that makes the cheap checks of a resync
// pass at every eighth offset: at 0 mod 8 a version-2 frame length of 16
// KiB, type put, a large write-order id. At the other offsets the length is
// above 64 MiB or the type byte invalid, whatever the size of the damage, so
// the work per MiB is the same at every size. Without the frame header
// checksum each candidate costs a checksum of the 16 KiB it claims.
var resyncTrap = []byte{0x00, 0x00, 0x40, 0x00, 0x01, 0xf0, 0xf0, 0xf0}

// tornTrap writes a log file: a put, then a put of damage bytes of
// resyncTrap torn short (the file ends inside it), so that a scan resyncs
// over the damage to the end of the file. It returns the path and the
// offset of the torn put.
func tornTrap(tb testing.TB, fsys vfs.FS, dir string, damage int) (string, int64) {
	tb.Helper()
	return tornTrapWith(tb, fsys, dir, damage, newFraming(), resyncTrap)
}

// resyncTrapV1 is resyncTrap for version-1 frames (type at +8): at every
// third offset a length of 64 KiB, type put, a large write-order id; a
// version-1 frame has no frame header checksum to reject them.
var resyncTrapV1 = []byte{0x00, 0x01, 0x01}

// tornTrapWith is tornTrap for a file of framing fr, with damage bytes of
// pattern.
func tornTrapWith(tb testing.TB, fsys vfs.FS, dir string, damage int, fr Framing, pattern []byte) (string, int64) {
	tb.Helper()
	w, err := create(fsys, dir, 1, fr)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := w.Write(mustAppendWith(tb, w.Framing(), &Record{Type: RecordPut, TxID: 1, WriteOrderID: 2, Body: []byte("good")})); err != nil {
		tb.Fatal(err)
	}
	body := bytes.Repeat(pattern, damage/len(pattern)+1)[:damage]
	torn := mustAppendWith(tb, w.Framing(), &Record{Type: RecordPut, TxID: 1, WriteOrderID: 3, Body: body})
	off, err := w.Write(torn[:len(torn)-1])
	if err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return w.Path(), off
}

// scanTrap scans the file of tornTrap and returns the payload bytes its
// resync checksummed.
func scanTrap(tb testing.TB, fsys vfs.FS, path string, tornAt int64, mapped bool) int64 {
	tb.Helper()
	s, err := NewScanner(fsys, path, 0)
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	if mapped && !s.MapFile() {
		tb.Fatal("not mapped")
	}
	n := 0
	for s.Next() {
		n++
	}
	if s.Err() != nil || n != 1 || s.Tail() != TailTorn || s.End() != tornAt {
		tb.Fatalf("scan: %d records, tail %v at %d, err %v; want 1 record and a torn tail at %d", n, s.Tail(), s.End(), s.Err(), tornAt)
	}
	return s.resyncPayload
}

// TestResyncCostsConstantWorkPerOffset: a resync over 256 KiB of
// resyncTrap checksums no payload (a candidate passes the frame header
// checksum with probability 2^-32), where without that checksum it would
// checksum 2 000 times the damaged bytes (512 MiB: 2 KiB per offset, and
// quadratic in the damage when the lengths claimed grow with it). The bound
// asserted is the damaged size itself: O(d).
func TestResyncCostsConstantWorkPerOffset(t *testing.T) {
	const damage = 256 << 10
	fsys := vfs.NewMem()
	path, off := tornTrap(t, fsys, "/", damage)
	if got := scanTrap(t, fsys, path, off, false); got > damage {
		t.Fatalf("the resync over %d damaged bytes checksummed %d payload bytes: not linear", damage, got)
	}
}

// BenchmarkResync times a scan whose resync runs over a torn put of 1, 4
// and 16 MiB of resyncTrap bytes (the worst case for the checks before
// the frame header checksum), buffered and through a mapping, and for
// contrast 256 KiB of resyncTrapV1 in a version-1 file. ns/MiB should
// be about the same at every size; "linear" runs all three sizes in each
// iteration and reports their ns/MiB side by side (the fastest iteration of
// each), and the ratios of the larger to the smallest (≈ 1 when the resync
// is linear; 4 and 16 if it were quadratic).
//
//	go test -run '^$' -bench Resync ./logfile/
func BenchmarkResync(b *testing.B) {
	sizes := []int{1 << 20, 4 << 20, 16 << 20}
	dir := b.TempDir()
	type trap struct {
		path string
		off  int64
	}
	traps := map[int]trap{}
	for _, size := range sizes {
		d := fmt.Sprintf("%s/%d", dir, size>>20)
		if err := vfs.OS().MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		p, off := tornTrap(b, vfs.OS(), d, size)
		traps[size] = trap{p, off}
	}
	for _, mapped := range []bool{false, true} {
		mode := "buffered"
		if mapped {
			mode = "mapped"
		}
		for _, size := range sizes {
			b.Run(fmt.Sprintf("%s/damage=%dMiB", mode, size>>20), func(b *testing.B) {
				tr := traps[size]
				b.SetBytes(int64(size))
				for b.Loop() {
					scanTrap(b, vfs.OS(), tr.path, tr.off, mapped)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(size>>20), "ns/MiB")
			})
		}
		// For contrast, the same measure on a version-1 file: every third
		// offset costs a 64 KiB checksum.
		b.Run(mode+"/v1/damage=256KiB", func(b *testing.B) {
			d := fmt.Sprintf("%s/v1-%s", dir, mode)
			if err := vfs.OS().MkdirAll(d, 0o755); err != nil {
				b.Fatal(err)
			}
			p, off := tornTrapWith(b, vfs.OS(), d, 256<<10, framingV1, resyncTrapV1)
			b.SetBytes(256 << 10)
			for b.Loop() {
				scanTrap(b, vfs.OS(), p, off, mapped)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)*4, "ns/MiB")
		})
		b.Run(mode+"/linear", func(b *testing.B) {
			// The fastest of the iterations for each size: the machine's
			// noise only ever adds time.
			best := make([]time.Duration, len(sizes))
			for b.Loop() {
				for i, size := range sizes {
					start := time.Now()
					scanTrap(b, vfs.OS(), traps[size].path, traps[size].off, mapped)
					if d := time.Since(start); best[i] == 0 || d < best[i] {
						best[i] = d
					}
				}
			}
			perMiB := make([]float64, len(sizes))
			for i, size := range sizes {
				perMiB[i] = float64(best[i].Nanoseconds()) / float64(size>>20)
				b.ReportMetric(perMiB[i], fmt.Sprintf("ns/MiB@%dMiB", size>>20))
			}
			for i := 1; i < len(sizes); i++ {
				b.ReportMetric(perMiB[i]/perMiB[0], fmt.Sprintf("ratio-%dMiB/1MiB", sizes[i]>>20))
			}
		})
	}
}
