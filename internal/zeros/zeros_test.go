package zeros

import "testing"

func TestAll(t *testing.T) {
	for n := range 40 {
		b := make([]byte, n)
		if !All(b) {
			t.Fatalf("All(%d zero bytes) = false", n)
		}
		for i := range n {
			b[i] = 1
			if All(b) {
				t.Fatalf("All(%d bytes with byte %d set) = true", n, i)
			}
			b[i] = 0
		}
	}
}
