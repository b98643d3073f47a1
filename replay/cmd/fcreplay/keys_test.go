package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flumego/filechannel/channel"
)

// TestDumpEncrypted: dump lists an encrypted channel's events with
// --keys-file or --keys-env; without, each is listed as encrypted (exit 1).
// inspect and verify need no key, and inspect names each file's key.
func TestDumpEncrypted(t *testing.T) {
	base := t.TempDir()
	f := &fixture{base: base, ckpt: filepath.Join(base, "checkpoint"), data: filepath.Join(base, "data")}
	key := strings.Repeat("5a", channel.KeySize)
	cfg := f.config()
	cfg.Keys = channel.StaticKeys("2026-12", map[string][]byte{"2026-12": bytes.Repeat([]byte{0x5a}, channel.KeySize)})
	c := mustOpen(t, cfg)
	putN(t, c, 0, 6, 3)
	mustClose(t, c)
	keyFile := filepath.Join(base, "keys")
	if err := os.WriteFile(keyFile, []byte("active 2026-12\n2026-12 "+key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	r := fcreplay(t, f.args("dump")...)
	r.wantCode(t, exitFailed)
	if strings.Count(r.stdout, "the event is encrypted") != 6 || strings.Contains(r.stdout, string(body(1))) {
		t.Fatalf("dump without keys:\n%s", r.stdout)
	}
	for _, extra := range [][]string{{"--keys-file", keyFile}, {"--keys-env", "FC_TEST_DUMP_KEYS"}} {
		t.Setenv("FC_TEST_DUMP_KEYS", "active 2026-12; 2026-12 "+key)
		r = fcreplay(t, f.args("dump", extra...)...)
		r.wantCode(t, exitOK)
		for i := range 6 {
			if !strings.Contains(r.stdout, fmt.Sprintf("{i=%d, src=test} %q", i, body(i))) {
				t.Errorf("dump %v: event %d missing:\n%s", extra, i, r.stdout)
			}
		}
	}
	r = fcreplay(t, f.args("inspect")...)
	r.wantCode(t, exitOK)
	if !strings.Contains(r.stdout, `encrypted with key "2026-12"`) {
		t.Errorf("inspect does not name the key:\n%s", r.stdout)
	}
	fcreplay(t, f.args("verify")...).wantCode(t, exitOK)
}

// TestDumpRefusesAFileOfAnotherChannel: two channels share a key, and a log
// file of one is copied over the other's file of the same id. The tools
// learn the victim's channel id from its directories: dump --keys-file
// lists none of the other channel's events as the victim's (each is an
// error, exit 1), verify reports foreign-log, and inspect names the
// channel each file is bound to.
func TestDumpRefusesAFileOfAnotherChannel(t *testing.T) {
	key := strings.Repeat("5a", channel.KeySize)
	keys := channel.StaticKeys("2026-12", map[string][]byte{"2026-12": bytes.Repeat([]byte{0x5a}, channel.KeySize)})
	var fs [2]*fixture
	for i := range fs {
		base := t.TempDir()
		fs[i] = &fixture{base: base, ckpt: filepath.Join(base, "checkpoint"), data: filepath.Join(base, "data")}
		cfg := fs[i].config()
		cfg.Keys = keys
		c := mustOpen(t, cfg)
		putN(t, c, 10*i, 6, 3)
		mustClose(t, c)
	}
	other, victim := fs[0], fs[1]
	keyFile := filepath.Join(victim.base, "keys")
	if err := os.WriteFile(keyFile, []byte("active 2026-12\n2026-12 "+key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	log1 := filepath.Join(victim.data, "log-0000000001")
	b, err := os.ReadFile(filepath.Join(other.data, "log-0000000001"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(log1, b, 0o600); err != nil {
		t.Fatal(err)
	}

	r := fcreplay(t, victim.args("dump", "--keys-file", keyFile)...)
	r.wantCode(t, exitFailed)
	for i := range 6 {
		if strings.Contains(r.stdout, string(body(i))) {
			t.Fatalf("dump lists an event of the other channel:\n%s", r.stdout)
		}
	}
	if strings.Count(r.stdout, "belongs to channel") != 6 {
		t.Fatalf("dump: want each of the 6 events refused as another channel's:\n%s", r.stdout)
	}
	r = fcreplay(t, victim.args("verify")...)
	if r.code == exitOK || !strings.Contains(r.stdout, "foreign-log") {
		t.Fatalf("verify: exit %d\n%s", r.code, r.stdout)
	}
	r = fcreplay(t, victim.args("inspect")...)
	if !strings.Contains(r.stdout, `encrypted with key "2026-12" for channel `) {
		t.Fatalf("inspect does not name the channel:\n%s", r.stdout)
	}
}
