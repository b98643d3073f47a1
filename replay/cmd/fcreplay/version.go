package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/internal/owner"
	"github.com/flumego/filechannel/logfile"
)

// versionReport is what fcreplay version prints: the build, and the
// format versions of every kind of file it reads. Every number comes from
// the build or from the format packages' constants.
type versionReport struct {
	Build   buildVersion    `json:"build"`
	Formats []formatVersion `json:"formats"`
	// MaxRecordType is the highest log record type this build knows; a
	// log holding a higher one is a newer release's and is refused.
	MaxRecordType     uint8  `json:"max_record_type"`
	MaxRecordTypeName string `json:"max_record_type_name"`
}

// buildVersion identifies the binary.
type buildVersion struct {
	// Release is the main module's version: a release tag (v1.2.0), a
	// pseudo-version stamped from the checkout's commit, or "(devel)"
	// (go run, go test, or a build without VCS information); "unknown"
	// when the binary carries no build information.
	Release string `json:"release"`
	Module  string `json:"module,omitempty"`
	// The commit a build from a checkout was made from (vcs.revision),
	// its time (vcs.time) and whether the work tree had uncommitted
	// changes (vcs.modified); empty when the build has no VCS stamp.
	Revision string `json:"vcs_revision,omitempty"`
	Time     string `json:"vcs_time,omitempty"`
	Modified bool   `json:"vcs_modified,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"` // GOOS/GOARCH the binary runs on
}

// formatVersion is the range of versions of one kind of file that this
// build reads, and the versions it writes.
type formatVersion struct {
	Kind   string   `json:"kind"`  // a stable key: log, checkpoint, meta, ...
	Files  string   `json:"files"` // the file names, for people
	Oldest int      `json:"reads_from"`
	Newest int      `json:"reads_to"`
	Writes []int    `json:"writes"`
	Notes  []string `json:"notes,omitempty"`
}

// formatVersions lists the files a channel has and their versions, from
// the constants of the packages that own them.
func formatVersions() []formatVersion {
	ckpt := func(kind, files string, v int) formatVersion {
		return formatVersion{Kind: kind, Files: files, Oldest: checkpoint.MinFormatVersion, Newest: v, Writes: []int{v}}
	}
	return []formatVersion{
		{
			Kind: "log", Files: "log files (" + logfile.LogName(1) + ", ...)",
			Oldest: logfile.MinFormatVersion, Newest: logfile.MaxFormatVersion,
			Writes: []int{logfile.FormatVersion, logfile.TimedBoundVersion, logfile.RecycledVersion, logfile.RecycledBoundVersion},
			Notes: []string{fmt.Sprintf("writes %d, or %d when encrypted; %d and %d in a recycled file (Config.RecycleLogFiles)",
				logfile.FormatVersion, logfile.TimedBoundVersion, logfile.RecycledVersion, logfile.RecycledBoundVersion)},
		},
		ckpt("checkpoint", checkpoint.CheckpointName, int(checkpoint.CheckpointVersion)),
		ckpt("meta", checkpoint.MetaName, checkpoint.MetaVersion),
		ckpt("inflight", checkpoint.InflightPutsName+", "+checkpoint.InflightTakesName, checkpoint.InflightVersion),
		ckpt("groups", checkpoint.CatalogName, checkpoint.CatalogVersion),
		ckpt("deliveries", checkpoint.JournalName, checkpoint.JournalVersion),
		{Kind: "channel_id", Files: owner.FileName, Oldest: owner.FormatVersion, Newest: owner.FormatVersion, Writes: []int{owner.FormatVersion}},
	}
}

// readBuild describes the binary from its build information (bi, ok as
// debug.ReadBuildInfo returns them).
func readBuild(bi *debug.BuildInfo, ok bool) buildVersion {
	b := buildVersion{Release: "unknown", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if !ok || bi == nil {
		return b
	}
	if bi.GoVersion != "" {
		b.Go = bi.GoVersion
	}
	b.Module = bi.Main.Path
	if bi.Main.Version != "" {
		b.Release = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

func newVersionReport(bi *debug.BuildInfo, ok bool) versionReport {
	return versionReport{
		Build:             readBuild(bi, ok),
		Formats:           formatVersions(),
		MaxRecordType:     uint8(logfile.MaxRecordType),
		MaxRecordTypeName: logfile.MaxRecordType.String(),
	}
}

const versionExample = `  fcreplay version
  fcreplay version --json`

func newVersionCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the release and the format versions of the files this build reads",
		Long: `version prints the release fcreplay was built from (with the commit, when built
from a checkout) and, for each kind of file of a channel, the format versions it
reads and writes. Files of a newer version are refused, never changed: use an
fcreplay built from the same release as the application, or a newer one.
It needs no directory flags.`,
		Example: versionExample,
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			r := newVersionReport(debug.ReadBuildInfo())
			if o.json {
				return o.printJSON(r)
			}
			return r.print(o.stdout)
		},
	}
}

// print writes the report as text.
func (r versionReport) print(w io.Writer) error {
	b := r.Build
	var line strings.Builder
	fmt.Fprintf(&line, "fcreplay %s", b.Release)
	if b.Revision != "" {
		fmt.Fprintf(&line, ", commit %s", b.Revision)
		if b.Time != "" {
			fmt.Fprintf(&line, " of %s", b.Time)
		}
		if b.Modified {
			line.WriteString(" with uncommitted changes")
		}
	}
	fmt.Fprintf(&line, ", %s %s", b.Go, b.Platform)
	fmt.Fprintln(w, line.String())
	fmt.Fprintln(w, "\nFormat versions it reads (it writes the newest; a newer one is refused, nothing changed):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range r.Formats {
		vs := fmt.Sprintf("version %d", f.Newest)
		if f.Oldest != f.Newest {
			vs = fmt.Sprintf("versions %d to %d", f.Oldest, f.Newest)
		}
		for _, n := range f.Notes {
			vs += "; " + n
		}
		if f.Kind == "log" {
			vs += fmt.Sprintf("; record types up to %d (%s)", r.MaxRecordType, r.MaxRecordTypeName)
		}
		fmt.Fprintf(tw, "  %s\t%s\n", f.Files, vs)
	}
	return tw.Flush()
}
