package testutil

import (
	"bytes"
	"errors"
	"os"
	"syscall"
	"testing"
)

// FillFS writes the file name until its filesystem is full (ENOSPC), in
// ever smaller chunks so that hardly a byte is left.
func FillFS(t testing.TB, name string) {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{64 << 10, 4 << 10, 512} {
		buf := bytes.Repeat([]byte{0x55}, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("fill %s: %v", name, err)
				}
				break
			}
		}
	}
}
