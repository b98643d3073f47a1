package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// repair and replay create files with the channel's modes: 0600 unless
// --file-mode (the channel's Config.FileMode) says otherwise; a mode the
// channel cannot use changes nothing.
func TestRepairAndReplayKeepTheModes(t *testing.T) {
	old := syscall.Umask(0) // the binary inherits it
	defer syscall.Umask(old)
	f := newFixture(t, damaged)
	ckpt := filepath.Join(f.ckpt, "checkpoint")
	corrupt := filepath.Join(f.data, "log-0000000001.1401.corrupt")
	wantMode := func(path string, want fs.FileMode) {
		t.Helper()
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %04o", path, fi.Mode(), err, uint32(want))
		}
	}
	wantMode(ckpt, 0o600)

	r := fcreplay(t, f.args("repair", "--file-mode", "0755")...)
	r.wantCode(t, exitFailed)
	if !strings.Contains(r.stderr, "FileMode 0755") {
		t.Errorf("repair --file-mode 0755: %q", r.stderr)
	}
	fcreplay(t, f.args("repair", "--file-mode", "rw")...).wantCode(t, exitUsage)
	if _, err := os.Stat(corrupt); err == nil {
		t.Fatal("a refused repair wrote a .corrupt file")
	}

	fcreplay(t, f.args("repair", "--file-mode", "0640", "--dir-mode", "0750")...).wantCode(t, exitOK)
	for _, p := range []string{corrupt, ckpt, filepath.Join(f.ckpt, "checkpoint.meta"), filepath.Join(f.backup, "backupComplete")} {
		wantMode(p, 0o640)
	}
	fcreplay(t, f.args("replay")...).wantCode(t, exitOK)
	wantMode(ckpt, 0o600)
	fcreplay(t, f.args("replay", "--file-mode=0660")...).wantCode(t, exitOK)
	wantMode(ckpt, 0o660)
}
