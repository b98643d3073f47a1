package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// CheckFuzzSeeds checks that the checked-in seed corpus of fuzz target
// (testdata/fuzz/<target>/<name>, in the current directory) holds exactly
// the []byte seeds given, in the file format go test reads; with update it
// rewrites them first (a test's -update flag).
func CheckFuzzSeeds(t testing.TB, target string, seeds map[string][]byte, update bool) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", target)
	for name, b := range seeds {
		path := filepath.Join(dir, name)
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if string(got) != want {
			t.Errorf("%s is stale (run with -update)", path)
		}
	}
}
