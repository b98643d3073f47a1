package main

import (
	"strings"
	"testing"
)

// -min-free is every queue's MinimumRequiredSpace: above the disk's free
// space a set is refused for disk space, and 0 checks nothing. (It was
// the channel's 500 MB, with no flag: on a small disk every set failed.)
func TestMinFree(t *testing.T) {
	s := startServer(t, options{dir: t.TempDir(), minFree: 1 << 50}) // 1 PiB, more than any disk
	c := dial(t, s.addr)
	if reply := c.line("set q 0 0 1\r\nx\r\n"); !strings.HasPrefix(reply, "SERVER_ERROR") || !strings.Contains(reply, "disk space") {
		t.Errorf("set with -min-free 1PiB: %q, want a refusal for disk space", reply)
	}
	s = startServer(t, options{dir: t.TempDir(), minFree: 0})
	c = dial(t, s.addr)
	if reply := c.line("set q 0 0 1\r\nx\r\n"); reply != "STORED\r\n" {
		t.Errorf("set with -min-free 0: %q, want STORED", reply)
	}
}
