package replay

import (
	"strings"
	"testing"

	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// TestVerifyFilterSkips: Verify reports a filter skip record that names a
// group never created, a put past its commit's count, or that is not
// followed by its put commit (bad-filter-skip), and a duplicate record
// past the count or not followed by its commit (bad-duplicate); one at the
// end of a file (a commit a crash cut) and good ones are not reported.
func TestVerifyFilterSkips(t *testing.T) {
	skip := func(tx uint64, group uint32, ranges ...uint32) logfile.Record {
		return logfile.Record{Type: logfile.RecordFilterSkip, TxID: tx, Group: group, Ranges: ranges}
	}
	dup := func(tx uint64, ranges ...uint32) logfile.Record {
		return logfile.Record{Type: logfile.RecordDuplicate, TxID: tx, Ranges: ranges}
	}
	for _, tc := range []struct {
		name string
		// write writes the records after the groups record (group 1 "f"
		// filtered, next group id 2) and 3 puts of tx 1.
		write func(l *logSet)
		want  string // the problem's detail, "" for none
	}{
		{"good", func(l *logSet) { l.write(1, skip(1, 1, 0, 1, 2, 1)); l.commitPut(1, 1) }, ""},
		{"cut_by_a_crash", func(l *logSet) { l.write(1, skip(1, 1, 0, 1)) }, ""},
		{"unknown_group", func(l *logSet) { l.write(1, skip(1, 5, 0, 1)); l.commitPut(1, 1) }, "names group 5, which was never created"},
		{"past_the_count", func(l *logSet) { l.write(1, skip(1, 1, 1, 3)); l.commitPut(1, 1) }, "(group 1) of transaction 1 names put 3 of it; its commit"},
		{"dup_good", func(l *logSet) { l.write(1, dup(1, 1, 2)); l.commitPut(1, 1) }, ""},
		{"dup_cut_by_a_crash", func(l *logSet) { l.write(1, dup(1, 0, 1)) }, ""},
		{"dup_past_the_count", func(l *logSet) { l.write(1, dup(1, 2, 2)); l.commitPut(1, 1) }, "duplicate record of transaction 1 names put 3 of it"},
		{"dup_no_commit", func(l *logSet) { l.write(1, dup(1, 0, 1)); l.putCommitted(1, 2, 1) }, "duplicate record of transaction 1 not followed"},
		{"no_commit", func(l *logSet) { l.write(1, skip(1, 1, 0, 1)); l.putCommitted(1, 2, 1) }, "not followed by its put commit"},
		{"rolled_back", func(l *logSet) { l.write(1, skip(1, 1, 0, 1)); l.rollback(1, 1) }, "not followed by its put commit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := vfs.NewMem()
			l := newLogSetOn(t, fsys, "/data", 1)
			if err := fsys.MkdirAll(vCkptDir, 0o755); err != nil {
				t.Fatal(err)
			}
			l.create(0, 1)
			l.write(1, logfile.Record{Type: logfile.RecordGroups, NextGroupID: 2, Catalog: []logfile.GroupInfo{
				{ID: 0, Since: 1, Capacity: 8}, {ID: 1, Name: "f", Since: 1, Capacity: 8, Filter: `headers["t"] == "x"`}}})
			l.puts(1, 1, 3)
			tc.write(l)
			rep, err := Verify(VerifyOptions{FS: fsys, CheckpointDir: vCkptDir, DataDirs: l.dirs})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range rep.Problems {
				if p.Kind == ProblemBadFilterSkip || p.Kind == ProblemBadDuplicate {
					got = append(got, p.Detail)
				}
			}
			switch {
			case tc.want == "" && len(got) != 0:
				t.Fatalf("problems %q, want none", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Fatalf("problems %q, want one with %q", got, tc.want)
			}
		})
	}
}
