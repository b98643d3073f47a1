package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/internal/owner"
	"github.com/flumego/filechannel/logfile"
)

// wantFormats is every kind of file a channel has, with the versions the
// format packages say this build reads and writes.
var wantFormats = map[string][3]int{ // kind: oldest read, newest read, written (plain)
	"log":        {logfile.MinFormatVersion, logfile.MaxFormatVersion, logfile.FormatVersion},
	"checkpoint": {checkpoint.MinFormatVersion, int(checkpoint.CheckpointVersion), int(checkpoint.CheckpointVersion)},
	"meta":       {checkpoint.MinFormatVersion, checkpoint.MetaVersion, checkpoint.MetaVersion},
	"inflight":   {checkpoint.MinFormatVersion, checkpoint.InflightVersion, checkpoint.InflightVersion},
	"groups":     {checkpoint.MinFormatVersion, checkpoint.CatalogVersion, checkpoint.CatalogVersion},
	"deliveries": {checkpoint.MinFormatVersion, checkpoint.JournalVersion, checkpoint.JournalVersion},
	"channel_id": {owner.FormatVersion, owner.FormatVersion, owner.FormatVersion},
}

// TestVersionJSON: version --json names the build and every kind of file
// with the versions of the format packages' constants; it needs no
// directory flags.
func TestVersionJSON(t *testing.T) {
	r := fcreplay(t, "version", "--json")
	r.wantCode(t, exitOK)
	if r.stderr != "" {
		t.Errorf("stderr: %q", r.stderr)
	}
	var got versionReport
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r.stdout)
	}
	// TestMain builds the binary from this module with go build.
	if got.Build.Module != "github.com/flumego/filechannel" || got.Build.Release == "" || got.Build.Release == "unknown" {
		t.Errorf("build %+v: want the module and its version", got.Build)
	}
	if got.Build.Platform != runtime.GOOS+"/"+runtime.GOARCH || !strings.HasPrefix(got.Build.Go, "go") {
		t.Errorf("build %+v: want the Go version and %s/%s", got.Build, runtime.GOOS, runtime.GOARCH)
	}
	if len(got.Formats) != len(wantFormats) {
		t.Errorf("%d formats, want %d: %+v", len(got.Formats), len(wantFormats), got.Formats)
	}
	for _, f := range got.Formats {
		w, ok := wantFormats[f.Kind]
		switch {
		case !ok:
			t.Errorf("unexpected format kind %q", f.Kind)
		case f.Oldest != w[0] || f.Newest != w[1] || len(f.Writes) == 0 || f.Writes[0] != w[2] || f.Files == "":
			t.Errorf("%s: %+v, want reads %d to %d, writes %d", f.Kind, f, w[0], w[1], w[2])
		}
		if f.Kind == "log" && !slices.Equal(f.Writes, []int{logfile.FormatVersion, logfile.TimedBoundVersion, logfile.RecycledVersion, logfile.RecycledBoundVersion}) {
			t.Errorf("log writes %v, want %d and %d (encrypted), %d and %d recycled", f.Writes, logfile.FormatVersion, logfile.TimedBoundVersion,
				logfile.RecycledVersion, logfile.RecycledBoundVersion)
		}
	}
	if got.MaxRecordType != uint8(logfile.MaxRecordType) || got.MaxRecordTypeName != logfile.MaxRecordType.String() {
		t.Errorf("max record type %d %q, want %d %q", got.MaxRecordType, got.MaxRecordTypeName, logfile.MaxRecordType, logfile.MaxRecordType)
	}
}

// TestVersionText: version prints the release on its first line, then a
// line per kind of file with its versions.
func TestVersionText(t *testing.T) {
	r := fcreplay(t, "version")
	r.wantCode(t, exitOK)
	lines := strings.Split(r.stdout, "\n")
	if !strings.HasPrefix(lines[0], "fcreplay ") || !strings.Contains(lines[0], runtime.GOOS+"/"+runtime.GOARCH) {
		t.Errorf("first line %q: want the release and the platform", lines[0])
	}
	for _, want := range []string{
		fmt.Sprintf("versions %d to %d; writes %d, or %d when encrypted; %d and %d in a recycled file (Config.RecycleLogFiles); record types up to %d (%s)",
			logfile.MinFormatVersion, logfile.MaxFormatVersion, logfile.FormatVersion, logfile.TimedBoundVersion,
			logfile.RecycledVersion, logfile.RecycledBoundVersion, logfile.MaxRecordType, logfile.MaxRecordType),
		checkpoint.MetaName, checkpoint.InflightTakesName, checkpoint.CatalogName, checkpoint.JournalName, owner.FileName,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := fcreplay(t, "version", "extra"); r.code != exitUsage {
		t.Errorf("version extra: exit %d, want %d", r.code, exitUsage)
	}
}

// TestReadBuild: the release line of a tagged build, of a build from a
// checkout (the VCS stamp) and of a binary without build information.
func TestReadBuild(t *testing.T) {
	const mod = "github.com/flumego/filechannel"
	plat := runtime.GOOS + "/" + runtime.GOARCH
	cases := []struct {
		name string
		bi   *debug.BuildInfo
		want string // the first line
	}{
		{"release", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Path: mod, Version: "v1.2.0"}},
			"fcreplay v1.2.0, go1.26.1 " + plat},
		{"checkout", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Path: mod, Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "7adc702f"},
				{Key: "vcs.time", Value: "2025-12-04T21:00:00Z"}, {Key: "vcs.modified", Value: "true"}}},
			"fcreplay (devel), commit 7adc702f of 2025-12-04T21:00:00Z with uncommitted changes, go1.26.1 " + plat},
		{"checkout_clean", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Path: mod, Version: "v0.0.0-20251204210000-7adc702f"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "7adc702f"}, {Key: "vcs.modified", Value: "false"}}},
			"fcreplay v0.0.0-20251204210000-7adc702f, commit 7adc702f, go1.26.1 " + plat},
		{"no_build_info", nil, "fcreplay unknown, " + runtime.Version() + " " + plat},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := newVersionReport(tc.bi, tc.bi != nil).print(&b); err != nil {
				t.Fatal(err)
			}
			if first, _, _ := strings.Cut(b.String(), "\n"); first != tc.want {
				t.Errorf("got  %q\nwant %q", first, tc.want)
			}
		})
	}
}
