package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// maxToolAlloc bounds what an fcreplay command over a small channel
// allocates, whatever the length of its small files.
const maxToolAlloc = 64 << 20

// TestVerifyDumpOversizeFiles: verify and dump over a channel one of whose
// small files grew to 256 MiB (a sparse tail of zeros) report it as
// damage, and allocate a bounded amount, not that file's length.
func TestVerifyDumpOversizeFiles(t *testing.T) {
	for _, name := range []string{"checkpoint", "checkpoint.meta", "inflighttakes", "groups",
		"group-1/checkpoint", "group-1/checkpoint.meta", "group-1/inflighttakes", "deliveries"} {
		t.Run(name, func(t *testing.T) {
			f := newDeadLetterFixture(t)
			p := filepath.Join(f.ckpt, filepath.FromSlash(name))
			if err := os.Truncate(p, 256<<20); err != nil {
				t.Fatal(err)
			}
			for _, cmd := range [][]string{f.args("verify"), f.args("dump", "--group", "a", "--json")} {
				r, n := runAllocated(cmd...)
				if n > maxToolAlloc {
					t.Errorf("fcreplay %s allocated %d MiB", cmd[0], n>>20)
				}
				if cmd[0] == "verify" && name != "deliveries" {
					r.wantCode(t, exitFailed)
					if !strings.Contains(r.stdout, p) {
						t.Errorf("verify does not name %s:\n%s", p, r.stdout)
					}
				}
				if cmd[0] == "dump" {
					r.wantCode(t, exitOK)
					if n := strings.Count(r.stdout, "\n"); n != len(f.groupQueued["a"]) {
						t.Errorf("dump listed %d events of a, want %d:\n%s", n, len(f.groupQueued["a"]), r.stdout)
					}
				}
				t.Logf("fcreplay %s: %d KiB allocated, exit %d", cmd[0], n>>10, r.code)
			}
		})
	}
}

// runAllocated runs an fcreplay command in this process and returns its
// result and the bytes it allocated.
func runAllocated(args ...string) (result, uint64) {
	var out, errOut strings.Builder
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	code := run(args, &out, &errOut)
	runtime.ReadMemStats(&after)
	return result{stdout: out.String(), stderr: errOut.String(), code: code}, after.TotalAlloc - before.TotalAlloc
}
