package replay

import (
	"slices"
	"testing"

	"github.com/flumego/filechannel/logfile"
)

// TestVerifyCosts: each kind of damage is charged the committed events it
// costs, for the recovery the channel would do and for a full replay (a
// repair or a rebuild), and the report's total is their sum. The channel of
// newVerifyChannel: the checkpoint queues a[2], b[0], b[1] (b is tx 2, two
// puts in file 2) with a[1] in flight; after it, tx 4 takes a[1] (file 2),
// tx 5 puts c[0], c[1] (file 1), tx 7 puts d[0] (file 2).
func TestVerifyCosts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(v *verifyChannel)
		kind   ProblemKind                  // the problem charged
		at     func(v *verifyChannel) int64 // its offset
		file   uint32
		want   Cost
		// notKinds must not be reported: the damage's problem covers them.
		notKinds []ProblemKind
	}{
		{
			// A put transaction written after the checkpoint loses a record:
			// both recoveries lose that event and deliver its other one.
			name:   "put_after_the_checkpoint",
			damage: func(v *verifyChannel) { v.flip(v.l.path(1), int64(v.c[0].Offset())+10) },
			kind:   ProblemCorruptRecord, file: 1,
			at:   func(v *verifyChannel) int64 { return int64(v.c[0].Offset()) },
			want: Cost{Lost: 1, LostFullReplay: 1},
		},
		{
			// A checkpointed event is damaged: the channel loses it alone
			// (a take skips it), and so does a full replay.
			name:   "checkpointed_put",
			damage: func(v *verifyChannel) { v.flip(v.l.path(2), int64(v.b[0].Offset())+10) },
			kind:   ProblemCorruptRecord, file: 2,
			at:       func(v *verifyChannel) int64 { return int64(v.b[0].Offset()) },
			want:     Cost{Lost: 1, LostFullReplay: 1},
			notKinds: []ProblemKind{ProblemBadPointer},
		},
		{
			// A take record after the checkpoint: the event it took stays
			// queued and comes back.
			name:   "take_record",
			damage: func(v *verifyChannel) { v.flip(v.l.path(2), v.take4+10) },
			kind:   ProblemCorruptRecord, file: 2,
			at:   func(v *verifyChannel) int64 { return v.take4 },
			want: Cost{Redelivered: 1},
		},
		{
			// File 1 cut at a[2], below what the checkpoint recorded: a[2]
			// was queued and is lost. (c, written after the checkpoint,
			// went with its commit record: nothing can count it.)
			name: "truncated_below_the_checkpoint",
			damage: func(v *verifyChannel) {
				v.writeFile(v.l.path(1), v.readFile(v.l.path(1))[:v.a[2].Offset()+7])
			},
			kind: ProblemTruncatedLog, file: 1,
			at:       func(v *verifyChannel) int64 { return int64(v.a[2].Offset()) },
			want:     Cost{Lost: 1, LostFullReplay: 1},
			notKinds: []ProblemKind{ProblemTornTail, ProblemBadPointer},
		},
		{
			// File 2's header names another file: no record of it reads
			// back, and the replays refuse it. The checkpoint's b[0], b[1]
			// are lost with it.
			name: "header_names_another_file",
			damage: func(v *verifyChannel) {
				b := v.readFile(v.l.path(2))
				copy(b, logfile.AppendFileHeader(nil, 9))
				v.writeFile(v.l.path(2), b)
			},
			kind: ProblemBadHeader, file: 2,
			at:       func(*verifyChannel) int64 { return 0 },
			want:     Cost{Lost: 2},
			notKinds: []ProblemKind{ProblemBadPointer},
		},
		{
			// Half a record past the end of file 2: a crash's torn tail
			// after the checkpoint, which costs nothing.
			name: "torn_tail_after_the_checkpoint",
			damage: func(v *verifyChannel) {
				b := v.readFile(v.l.path(2))
				v.writeFile(v.l.path(2), append(b, 0, 0, 0, 40, 1, 2, 3))
			},
			kind: ProblemTornTail, file: 2,
			at:       func(v *verifyChannel) int64 { return int64(len(v.readFile(v.l.path(2)))) },
			want:     Cost{},
			notKinds: []ProblemKind{ProblemTruncatedLog},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newVerifyChannel(t)
			v.writeCheckpoint()
			at := tc.at(v)
			tc.damage(v)
			rep := v.verify(v.opts())
			i := slices.IndexFunc(rep.Problems, func(p Problem) bool {
				return p.Kind == tc.kind && p.File == v.l.path(tc.file) && p.Offset == at
			})
			if i < 0 {
				t.Fatalf("no %s at %s:%d; problems:\n%v", tc.kind, v.l.path(tc.file), at, rep)
			}
			if got := rep.Problems[i].Cost; got != tc.want {
				t.Errorf("%s costs %+v, want %+v", tc.kind, got, tc.want)
			}
			var sum Cost
			for _, p := range rep.Problems {
				sum.add(p.Cost)
				if slices.Contains(tc.notKinds, p.Kind) {
					t.Errorf("also reported: %v", p)
				}
			}
			if rep.Cost != sum {
				t.Errorf("report cost %+v, problems sum to %+v", rep.Cost, sum)
			}
		})
	}
}

// TestReplayReportsTruncatedLogs: a log file shorter than the length the
// checkpoint recorded is in Result.Truncated with the queued events cut
// off; a file that is only longer is not.
func TestReplayReportsTruncatedLogs(t *testing.T) {
	v := newVerifyChannel(t)
	v.writeCheckpoint()
	cut := int64(v.a[2].Offset()) + 7
	v.writeFile(v.l.path(1), v.readFile(v.l.path(1))[:cut])
	res, _, err := v.l.run(v.st, newQueue(t, v.st.Capacity, v.st.Head, v.ring))
	if err != nil {
		t.Fatal(err)
	}
	want := []TruncatedLog{{Path: v.l.path(1), Size: cut, End: int64(v.a[2].Offset()), Position: logState(v.st, 1).Position, Events: 1}}
	if !slices.Equal(res.Truncated, want) {
		t.Fatalf("Truncated %+v, want %+v", res.Truncated, want)
	}
	if logState(v.st, 1).Position <= cut {
		t.Fatalf("test setup: position %d, cut at %d", logState(v.st, 1).Position, cut)
	}
}
