package replay

import "testing"

// TestInRanges compares the binary search with a plain scan over every
// index of a set of increasing, non-touching ranges.
func TestInRanges(t *testing.T) {
	for _, rs := range [][]uint32{nil, {0, 1}, {3, 2}, {0, 2, 5, 1, 9, 4}, {1, 1, 3, 1, 5, 1, 7, 1}} {
		for i := range 16 {
			want := false
			for k := 0; k+1 < len(rs); k += 2 {
				want = want || (i >= int(rs[k]) && i < int(rs[k]+rs[k+1]))
			}
			if got := inRanges(rs, i); got != want {
				t.Errorf("inRanges(%v, %d) = %v, want %v", rs, i, got, want)
			}
		}
	}
}
