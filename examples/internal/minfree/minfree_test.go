package minfree

import (
	"flag"
	"io"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Bytes
	}{
		{"0", 0},
		{"524288000", 524_288_000},
		{"64MB", 64_000_000},
		{"64mb", 64_000_000},
		{"64M", 64 << 20},
		{"64MiB", 64 << 20},
		{"64mib", 64 << 20},
		{"1GiB", 1 << 30},
		{"2GB", 2_000_000_000},
		{"8k", 8 << 10},
		{"100B", 100},
		{" 16 MiB ", 16 << 20},
		{"1TiB", 1 << 40},
	} {
		got, err := Parse(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for name, in := range map[string]string{
		"empty":            "",
		"negative":         "-1",
		"no_number":        "MB",
		"unknown_unit":     "64XB",
		"fraction":         "1.5GB",
		"two_units":        "1GBMB",
		"overflow":         "9223372036854775808",
		"overflow_by_unit": "9000000TiB",
	} {
		if got, err := Parse(in); err == nil {
			t.Errorf("%s: Parse(%q) = %d, want an error", name, in, got)
		}
	}
}

func TestString(t *testing.T) {
	for _, tc := range []struct {
		in   Bytes
		want string
	}{
		{Default, "500MiB"},
		{0, "0"},
		{1000, "1KB"},
		{64_000_000, "64MB"},
		{1001, "1001"},
		{64 << 20, "64MiB"},
		{1 << 30, "1GiB"},
		{1536, "1536"},
		{3 << 10, "3KiB"},
	} {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("%d.String() = %q, want %q", tc.in, got, tc.want)
		}
		if back, err := Parse(tc.want); err != nil || back != tc.in {
			t.Errorf("Parse(%q) = %d, %v: does not read back %d", tc.want, back, err, tc.in)
		}
	}
}

// As a flag: the default shows in -h, a value is read, and 0 means no
// check to the channel (whose 0 is the default).
func TestFlag(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	b := Default
	fs.Var(&b, "min-free", Usage)
	var help strings.Builder
	fs.SetOutput(&help)
	fs.PrintDefaults()
	if !strings.Contains(help.String(), "-min-free bytes") || !strings.Contains(help.String(), "(default 500MiB)") {
		t.Errorf("-h:\n%s", help.String())
	}
	if b.Config() != 524_288_000 {
		t.Errorf("default Config() = %d", b.Config())
	}
	if err := fs.Parse([]string{"-min-free", "16MB"}); err != nil || b != 16_000_000 || b.Config() != 16_000_000 {
		t.Fatalf("-min-free 16MB: %d, %v", b, err)
	}
	if err := fs.Parse([]string{"-min-free", "0"}); err != nil || b.Config() != -1 {
		t.Fatalf("-min-free 0: Config() %d, %v; want -1 (no check)", b.Config(), err)
	}
	fs.SetOutput(io.Discard)
	if err := fs.Parse([]string{"-min-free", "lots"}); err == nil || !strings.Contains(err.Error(), "64MiB") {
		t.Fatalf("-min-free lots: %v, want an error with an example", err)
	}
}
