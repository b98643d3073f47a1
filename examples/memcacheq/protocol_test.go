package main

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
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
		{"get_bad_name", "get a/b", command{name: "get", dataLen: -1}, "CLIENT_ERROR bad queue name"},
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
		{"delete", "delete q", command{name: "delete", dataLen: -1}, "CLIENT_ERROR delete is not supported"},
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
		case "get", "gets", "set":
			if len(cmd.keys) == 0 || (cmd.name == "set" && len(cmd.keys) != 1) {
				t.Fatalf("%s with keys %q", cmd.name, cmd.keys)
			}
			seen := map[string]bool{}
			for _, k := range cmd.keys {
				if !validName([]byte(k)) {
					t.Fatalf("accepted queue name %q", k)
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
