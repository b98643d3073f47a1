package main

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseCommand(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		want    command
		wantErr string // "" = no error; else the reply line
	}{
		{"get_one", "get jobs", command{name: "get", keys: []string{"jobs"}, dataLen: -1}, ""},
		{"get_many", "get a b c", command{name: "get", keys: []string{"a", "b", "c"}, dataLen: -1}, ""},
		{"get_repeated_name_once", "get a b a a b", command{name: "get", keys: []string{"a", "b"}, dataLen: -1}, ""},
		{"gets", "gets q.1_x-y", command{name: "gets", keys: []string{"q.1_x-y"}, dataLen: -1}, ""},
		{"extra_spaces", "  get   a  ", command{name: "get", keys: []string{"a"}, dataLen: -1}, ""},
		{"set", "set q 5 0 10", command{name: "set", keys: []string{"q"}, flags: 5, dataLen: 10}, ""},
		{"set_noreply", "set q 0 -1 0 noreply", command{name: "set", keys: []string{"q"}, exptime: -1, noreply: true}, ""},
		{"set_max_flags", "set q 4294967295 0 1", command{name: "set", keys: []string{"q"}, flags: 1<<32 - 1, dataLen: 1}, ""},
		{"stats", "stats", command{name: "stats", dataLen: -1}, ""},
		{"version", "version", command{name: "version", dataLen: -1}, ""},
		{"quit", "quit", command{name: "quit", dataLen: -1}, ""},

		{"empty", "", command{dataLen: -1}, "ERROR"},
		{"blank", "   ", command{dataLen: -1}, "ERROR"},
		{"unknown", "bogus a b", command{dataLen: -1}, "ERROR"},
		{"upper_case", "GET q", command{dataLen: -1}, "ERROR"},
		{"get_no_key", "get", command{name: "get", dataLen: -1}, "CLIENT_ERROR get needs at least one queue name"},
		{"get_bad_name", "get a*b", command{name: "get", dataLen: -1}, "CLIENT_ERROR bad queue name"},
		{"get_unknown_option", "get a/b", command{name: "get", dataLen: -1}, `CLIENT_ERROR unknown option "b" in "a/b"`},
		{"get_options", "get a/close/open a+g/t=5 a/close/open", command{name: "get", keys: []string{"a/close/open", "a+g/t=5"}, dataLen: -1}, ""},
		{"get_dotdot", "get ..", command{name: "get", dataLen: -1}, "CLIENT_ERROR bad queue name"},
		{"get_long_name", "get " + strings.Repeat("x", 65), command{name: "get", dataLen: -1}, "CLIENT_ERROR bad queue name"},
		{"set_short", "set q 0 0", command{name: "set", dataLen: -1}, "CLIENT_ERROR bad command line format"},
		{"set_long", "set q 0 0 1 noreply x", command{name: "set", dataLen: 1}, "CLIENT_ERROR bad command line format"},
		{"set_bad_length", "set q 0 0 abc", command{name: "set", dataLen: -1}, "CLIENT_ERROR bad data length"},
		{"set_negative_length", "set q 0 0 -1", command{name: "set", dataLen: -1}, "CLIENT_ERROR bad data length"},
		{"set_bad_name_skips_block", "set ../x 0 0 3", command{name: "set", dataLen: 3}, "CLIENT_ERROR bad queue name"},
		{"set_bad_flags_skips_block", "set q -1 0 3", command{name: "set", keys: []string{"q"}, dataLen: 3}, "CLIENT_ERROR bad flags"},
		{"set_flags_overflow", "set q 4294967296 0 3", command{name: "set", keys: []string{"q"}, dataLen: 3}, "CLIENT_ERROR bad flags"},
		{"set_bad_exptime", "set q 0 never 3", command{name: "set", keys: []string{"q"}, dataLen: 3}, "CLIENT_ERROR bad exptime"},
		{"set_bad_noreply", "set q 0 0 3 please", command{name: "set", keys: []string{"q"}, dataLen: 3}, "CLIENT_ERROR bad command line format: expected noreply"},
		{"add_skips_block", "add q 0 0 7", command{name: "add", dataLen: 7}, "CLIENT_ERROR add is not supported"},
		{"cas_skips_block", "cas q 0 0 7 99", command{name: "cas", dataLen: 7}, "CLIENT_ERROR cas is not supported"},
		{"delete", "delete q", command{name: "delete", keys: []string{"q"}, dataLen: -1}, ""},
		{"delete_group", "delete q+audit", command{name: "delete", keys: []string{"q+audit"}, dataLen: -1}, ""},
		{"delete_time_0_noreply", "delete q 0 noreply", command{name: "delete", keys: []string{"q"}, noreply: true, dataLen: -1}, ""},
		{"delete_time", "delete q 10", command{name: "delete", dataLen: -1}, "CLIENT_ERROR bad command line format"},
		{"delete_options", "delete q/open", command{name: "delete", dataLen: -1}, "CLIENT_ERROR delete takes a queue or a group, without options"},
		{"delete_bad_name_noreply", "delete ../x noreply", command{name: "delete", noreply: true, dataLen: -1}, "CLIENT_ERROR bad queue name"},
		{"set_group", "set q+audit 0 0 1", command{name: "set", dataLen: 1}, `CLIENT_ERROR set "q+audit": set the queue q`},
		{"set_bad_flags_noreply", "set q x 0 3 noreply", command{name: "set", keys: []string{"q"}, noreply: true, dataLen: 3}, "CLIENT_ERROR bad flags"},
		{"set_no_length_noreply", "set q 0 0 noreply", command{name: "set", noreply: true, dataLen: -1}, "CLIENT_ERROR bad data length"},
		{"add_noreply", "add q 0 0 2 noreply", command{name: "add", noreply: true, dataLen: 2}, "CLIENT_ERROR add is not supported"},
		{"incr_noreply", "incr q 1 noreply", command{name: "incr", noreply: true, dataLen: -1}, "CLIENT_ERROR incr is not supported"},
		{"get_noreply_is_a_name", "get noreply", command{name: "get", keys: []string{"noreply"}, dataLen: -1}, ""},
		{"incr", "incr q 1", command{name: "incr", dataLen: -1}, "CLIENT_ERROR incr is not supported"},
		{"stats_group", "stats slabs", command{name: "stats", dataLen: -1}, "CLIENT_ERROR stats \"slabs\" is not supported"},
		{"version_args", "version 2", command{name: "version", dataLen: -1}, "CLIENT_ERROR version takes no arguments"},
		{"control_bytes_quoted", "get a\x00b", command{name: "get", dataLen: -1}, `CLIENT_ERROR bad queue name "a\x00b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCommand([]byte(tt.line))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("parseCommand(%q): %v", tt.line, err)
			case tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)):
				t.Fatalf("parseCommand(%q): error %v, want %q...", tt.line, err, tt.wantErr)
			}
			for i, k := range got.reads {
				if k.raw != got.keys[i] {
					t.Fatalf("parseCommand(%q): read %d is %q, key %q", tt.line, i, k.raw, got.keys[i])
				}
			}
			got.reads = nil // TestParseReadKey checks them
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("parseCommand(%q) = %+v, want %+v", tt.line, got, tt.want)
			}
		})
	}
}

// format writes cmd back as a command line (the inverse of parseCommand
// for the commands it accepts).
func format(cmd command) string {
	switch cmd.name {
	case "get", "gets":
		return cmd.name + " " + strings.Join(cmd.keys, " ")
	case "delete":
		s := "delete " + cmd.keys[0]
		if cmd.noreply {
			s += " noreply"
		}
		return s
	case "set":
		s := "set " + cmd.keys[0] + " " + strconv.FormatUint(uint64(cmd.flags), 10) + " " +
			strconv.FormatInt(cmd.exptime, 10) + " " + strconv.FormatInt(cmd.dataLen, 10)
		if cmd.noreply {
			s += " noreply"
		}
		return s
	}
	return cmd.name
}

func FuzzParseCommand(f *testing.F) {
	for _, seed := range []string{
		"get jobs", "gets a b c", "set q 0 0 5", "set q 1 -1 0 noreply", "stats", "version", "quit",
		"add q 0 0 3", "cas q 0 0 3 1", "delete q", "", " ", "get ..", "set q 0 0 99999999999999999999",
		"get \x00", "set q\t0\t0\t1", "\xff\xfe", "get a a", "gets a b a",
		"get q/open", "get q+audit/close/open/t=500", "get q/peek q/abort", "delete q+g noreply", "set q 0 0 1 noreply",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		cmd, err := parseCommand(line)
		if err != nil {
			var pe *protoError
			if !errors.As(err, &pe) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			if msg := err.Error(); strings.ContainsAny(msg, "\r\n") || len(msg) > 300 {
				t.Fatalf("reply line %q could break the protocol", msg)
			}
			if cmd.dataLen < -1 {
				t.Fatalf("dataLen %d", cmd.dataLen)
			}
			return
		}
		switch cmd.name {
		case "get", "gets", "set", "delete":
			if len(cmd.keys) == 0 || (cmd.name != "get" && cmd.name != "gets" && len(cmd.keys) != 1) {
				t.Fatalf("%s with keys %q", cmd.name, cmd.keys)
			}
			seen := map[string]bool{}
			for _, k := range cmd.keys {
				rk, err := parseReadKey([]byte(k))
				if err != nil || !validName([]byte(rk.queue)) || (cmd.name == "set" && k != rk.queue) ||
					(cmd.name == "delete" && k != rk.target()) {
					t.Fatalf("accepted %s key %q (%+v, %v)", cmd.name, k, rk, err)
				}
				if seen[k] {
					t.Fatalf("queue name %q twice in %q", k, cmd.keys)
				}
				seen[k] = true
			}
		case "stats", "version", "quit":
		default:
			t.Fatalf("accepted command %q", cmd.name)
		}
		if (cmd.name == "set") != (cmd.dataLen >= 0) {
			t.Fatalf("%s with dataLen %d", cmd.name, cmd.dataLen)
		}
		again, err := parseCommand([]byte(format(cmd)))
		if err != nil || !reflect.DeepEqual(again, cmd) {
			t.Fatalf("round trip of %q: %+v, %v; want %+v", line, again, err, cmd)
		}
	})
}

func TestParseReadKey(t *testing.T) {
	tests := []struct {
		key     string
		want    readKey // raw is filled in
		wantErr string
	}{
		{"q", readKey{queue: "q"}, ""},
		{"q+audit", readKey{queue: "q", group: "audit"}, ""},
		{"Q.1+a.b_c-9", readKey{queue: "Q.1", group: "a.b_c-9"}, ""},
		{"q/open", readKey{queue: "q", open: true}, ""},
		{"q/close", readKey{queue: "q", close: true}, ""},
		{"q/close/open", readKey{queue: "q", open: true, close: true}, ""},
		{"q/abort", readKey{queue: "q", abort: true}, ""},
		{"q+g/peek", readKey{queue: "q", group: "g", peek: true}, ""},
		{"q/t=500", readKey{queue: "q", wait: 500 * time.Millisecond}, ""},
		{"q/t=500/open", readKey{queue: "q", open: true, wait: 500 * time.Millisecond}, ""},
		{"q/open/t=0", readKey{queue: "q", open: true}, ""},
		{"q/peek/t=2147483647", readKey{queue: "q", peek: true, wait: maxWaitMillis * time.Millisecond}, ""},

		{"q/t=2147483648", readKey{}, "CLIENT_ERROR bad option"},
		{"q/t=-1", readKey{}, "CLIENT_ERROR bad option"},
		{"q/t=", readKey{}, "CLIENT_ERROR bad option"},
		{"q/", readKey{}, "CLIENT_ERROR unknown option"},
		{"q//open", readKey{}, "CLIENT_ERROR unknown option"},
		{"q/OPEN", readKey{}, "CLIENT_ERROR unknown option"},
		{"q/peek/open", readKey{}, "CLIENT_ERROR options of"},
		{"q/abort/close", readKey{}, "CLIENT_ERROR options of"},
		{"q/peek/abort", readKey{}, "CLIENT_ERROR options of"},
		{"q+", readKey{}, "CLIENT_ERROR bad group name"},
		{"q+Audit", readKey{}, "CLIENT_ERROR bad group name"},
		{"q+a+b", readKey{}, "CLIENT_ERROR bad group name"},
		{"q+" + strings.Repeat("g", 65), readKey{}, "CLIENT_ERROR bad group name"},
		{"+g", readKey{}, "CLIENT_ERROR bad queue name"},
		{"../q/open", readKey{}, "CLIENT_ERROR bad queue name"},
		{"/open", readKey{}, "CLIENT_ERROR bad queue name"},
	}
	for _, tt := range tests {
		got, err := parseReadKey([]byte(tt.key))
		if tt.wantErr != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
				t.Errorf("parseReadKey(%q): %+v, %v; want error %q...", tt.key, got, err, tt.wantErr)
			}
			continue
		}
		tt.want.raw = tt.key
		if err != nil || got != tt.want {
			t.Errorf("parseReadKey(%q) = %+v, %v; want %+v", tt.key, got, err, tt.want)
		}
	}
}
