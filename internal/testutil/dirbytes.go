package testutil

import (
	"io/fs"
	"path/filepath"
	"testing"
)

// DirBytes returns the total size of the regular files under dirs (zeros a
// log file has laid out ahead are written, so they count).
func DirBytes(t testing.TB, dirs ...string) int64 {
	t.Helper()
	var n int64
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return n
}
