package replay

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// counts are the Result counters a scenario checks.
type counts struct {
	records, skipped, puts, takes, commits, rollbacks int64
	returned, dropped, missing                        int
}

func checkCounts(t *testing.T, res *Result, want counts) {
	t.Helper()
	check := func(name string, got, want int64) {
		t.Helper()
		if got != want {
			t.Errorf("Result.%s = %d, want %d", name, got, want)
		}
	}
	check("Records", res.Records, want.records)
	check("Skipped", res.Skipped, want.skipped)
	check("Puts", res.Puts, want.puts)
	check("Takes", res.Takes, want.takes)
	check("Commits", res.Commits, want.commits)
	check("Rollbacks", res.Rollbacks, want.rollbacks)
	check("Returned", int64(res.Returned), int64(want.returned))
	check("Dropped", int64(res.Dropped), int64(want.dropped))
	check("Missing", int64(res.Missing), int64(want.missing))
}

// scenario is one replay: build writes the logs and returns the checkpoint
// (nil for a full replay), the queue it loaded (nil for an empty one) and
// the queue the replay must leave.
type scenario struct {
	name  string
	dirs  int
	build func(l *logSet) (st *checkpoint.State, q *eventqueue.Queue, want []ptr)
	want  *counts                         // nil: not checked
	check func(t *testing.T, res *Result) // optional
}

func runScenarios(t *testing.T, tests []scenario) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLogSet(t, max(tc.dirs, 1))
			st, q, want := tc.build(l)
			res, q := l.mustRun(st, q)
			wantQueue(t, q, want)
			if tc.want != nil {
				checkCounts(t, res, *tc.want)
			}
			if tc.check != nil {
				tc.check(t, res)
			}
		})
	}
}

func TestRunFullReplay(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "full_replay_single_dir",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				l.create(0, 1)
				a := l.putCommitted(1, 1, 2)
				b := l.putCommitted(1, 2, 1)
				l.puts(1, 3, 2) // never commits
				l.puts(1, 4, 1)
				l.rollback(1, 4)
				l.takeCommitted(1, 5, a[0])
				l.take(1, 6, a[1]) // its commit never made it
				f := l.putCommitted(1, 7, 3)
				l.takeCommitted(1, 8, f[1])
				return nil, nil, cat(a[1:], b, f[:1], f[2:])
			},
			want: &counts{records: 18, puts: 6, takes: 2, commits: 5, rollbacks: 1, dropped: 3},
		},
		{
			name: "full_replay_over_several_files_of_one_dir",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				l.create(0, 1)
				a := l.putCommitted(1, 1, 2)
				l.create(0, 2)
				b := l.puts(2, 2, 1)
				l.create(0, 3) // the dir rolled in the middle of tx 2
				b = append(b, l.put(3, 2))
				l.commitPut(3, 2)
				l.takeCommitted(3, 3, a[0], b[0])
				return nil, nil, cat(a[1:], b[1:])
			},
			want: &counts{records: 8, puts: 4, takes: 2, commits: 3},
		},
		{
			name: "multi_dir_merge_by_write_order",
			dirs: 3,
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				l.create(0, 1)
				l.create(1, 2)
				l.create(2, 3)
				// Commit order (write-order ids): tx2 5, tx4 8, tx1 9, tx3 10.
				// File order would be tx1, tx2, tx4, tx3.
				p1a := l.write(1, rec(logfile.RecordPut, 1, 1))
				p2 := l.write(2, rec(logfile.RecordPut, 2, 2))
				p3a := l.write(3, rec(logfile.RecordPut, 3, 3))
				p1b := l.write(1, rec(logfile.RecordPut, 1, 4))
				l.write(2, commitRec(logfile.RecordPut, 2, 5))
				p3b := l.write(3, rec(logfile.RecordPut, 3, 6))
				p4 := l.write(2, rec(logfile.RecordPut, 4, 7))
				l.write(2, commitRec(logfile.RecordPut, 4, 8))
				l.write(1, commitRec(logfile.RecordPut, 1, 9))
				l.write(3, commitRec(logfile.RecordPut, 3, 10))
				// tx5 in the third dir takes tx4's event; tx6 in the first
				// dir puts one more after everything.
				l.write(3, logfile.Record{Type: logfile.RecordTake, TxID: 5, WriteOrderID: 11, Pointers: []uint64{uint64(p4)}})
				l.write(3, commitRec(logfile.RecordTake, 5, 12))
				p6 := l.write(1, rec(logfile.RecordPut, 6, 13))
				l.write(1, commitRec(logfile.RecordPut, 6, 14))
				return nil, nil, []ptr{p2, p1a, p1b, p3a, p3b, p6}
			},
			want: &counts{records: 14, puts: 7, takes: 1, commits: 6},
			check: func(t *testing.T, res *Result) {
				if res.MaxWriteOrderID != 14 || res.MaxTxID != 6 || res.MaxFileID != 3 {
					t.Errorf("MaxWriteOrderID, MaxTxID, MaxFileID = %d, %d, %d, want 14, 6, 3", res.MaxWriteOrderID, res.MaxTxID, res.MaxFileID)
				}
			},
		},
		{
			name: "take_commit_in_other_dir_than_put",
			dirs: 2,
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				l.create(0, 1)
				l.create(1, 2)
				a := l.putCommitted(1, 1, 3)
				l.takeCommitted(2, 2, a[0], a[2])
				b := l.putCommitted(2, 3, 1)
				l.takeCommitted(1, 4, b[0])
				return nil, nil, a[1:2]
			},
			want: &counts{records: 10, puts: 4, takes: 3, commits: 4},
			check: func(t *testing.T, res *Result) {
				wantTakesFrom(t, res, map[uint32][]uint32{1: {2}, 2: {1}})
			},
		},
	})
}

func rec(typ logfile.RecordType, tx, woid uint64) logfile.Record {
	r := logfile.Record{Type: typ, TxID: tx, WriteOrderID: woid}
	if typ == logfile.RecordPut {
		r.Body = []byte("body")
	}
	return r
}

func commitRec(typ logfile.RecordType, tx, woid uint64) logfile.Record {
	return logfile.Record{Type: logfile.RecordCommit, TxID: tx, WriteOrderID: woid, CommitType: typ}
}

func wantTakesFrom(t *testing.T, res *Result, want map[uint32][]uint32) {
	t.Helper()
	if !maps.EqualFunc(res.Completes, want, slices.Equal) {
		t.Errorf("Completes = %v, want %v", res.Completes, want)
	}
}

// TestRunTransactionOutcomes: only committed transactions change the queue.
func TestRunTransactionOutcomes(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "uncommitted_puts_vanish",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				l.create(0, 1)
				a := l.putCommitted(1, 1, 1)
				l.puts(1, 2, 3)
				b := l.putCommitted(1, 3, 1)
				l.puts(1, 4, 1)
				return nil, nil, cat(a, b)
			},
			want: &counts{records: 8, puts: 2, commits: 2, dropped: 4},
		},
		{
			name: "rolled_back_puts_vanish",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				l.create(0, 1)
				l.puts(1, 1, 2)
				a := l.putCommitted(1, 2, 1)
				l.rollback(1, 1)
				return nil, nil, a
			},
			want: &counts{records: 5, puts: 1, commits: 1, rollbacks: 1, dropped: 2},
		},
		{
			name: "uncommitted_takes_leave_events_in_place",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				l.create(0, 1)
				a := l.putCommitted(1, 1, 3)
				b := l.putCommitted(1, 2, 2)
				l.take(1, 3, a[1], b[0]) // the crash came before the commit
				return nil, nil, cat(a, b)
			},
			want: &counts{records: 8, puts: 5, takes: 0, commits: 2},
		},
		{
			name: "rolled_back_takes_leave_events_in_place",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				l.create(0, 1)
				a := l.putCommitted(1, 1, 3)
				l.take(1, 2, a[0], a[1])
				l.rollback(1, 2)
				l.commitTake(1, 2) // a commit after the rollback finds nothing
				return nil, nil, a
			},
			want: &counts{records: 7, puts: 3, takes: 0, commits: 2, rollbacks: 1},
		},
		{
			name: "take_records_of_one_tx_accumulate_until_commit",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				l.create(0, 1)
				a := l.putCommitted(1, 1, 4)
				l.take(1, 2, a[0])
				l.take(1, 2, a[2])
				l.commitTake(1, 2)
				return nil, nil, []ptr{a[1], a[3]}
			},
			want: &counts{records: 8, puts: 4, takes: 2, commits: 2},
		},
		{
			name: "empty_commits_change_nothing",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				l.create(0, 1)
				a := l.putCommitted(1, 1, 2)
				l.commitPut(1, 2)
				l.commitTake(1, 3)
				l.take(1, 4)
				l.commitTake(1, 4)
				return nil, nil, a
			},
			want: &counts{records: 7, puts: 2, takes: 0, commits: 4},
		},
		{
			name: "taken_then_put_in_one_replay_never_enters_the_queue",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				l.create(0, 1)
				a := l.putCommitted(1, 1, 3)
				l.takeCommitted(1, 2, a...)
				b := l.putCommitted(1, 3, 1)
				return nil, newQueue(l.tb, 1, 0, nil), b // capacity 1 is enough
			},
			want: &counts{records: 8, puts: 4, takes: 3, commits: 3},
		},
		{
			name: "take_of_an_event_not_queued_is_counted_missing",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				l.create(0, 1)
				a := l.putCommitted(1, 1, 2)
				l.takeCommitted(1, 2, eventqueue.NewPointer(1, 1<<20), a[1])
				return nil, nil, a[:1]
			},
			want: &counts{records: 5, puts: 2, takes: 2, commits: 2, missing: 1},
		},
	})
}

// TestRunFromCheckpoint: records after the checkpoint's write-order id W
// are applied on top of the ring and the transactions in flight at W.
func TestRunFromCheckpoint(t *testing.T) {
	// skipsOld writes a put tx before and after an earlier position; the
	// position under test is chosen by pos from (header, middle, W).
	skipsOld := func(pos func(mid, atW int64) int64) func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
		return func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
			l.create(0, 1)
			a := l.putCommitted(1, 1, 2) // woids 1-3
			mid := l.size(1)
			b := l.putCommitted(1, 2, 1) // woids 4-5
			ring := cat(a, b)
			st := l.state(l.woid, ring)
			logState(st, 1).Position = pos(mid, l.size(1))
			c := l.putCommitted(1, 3, 2) // woids 6-8
			l.takeCommitted(1, 4, a[0])  // woids 9-10
			return st, newQueue(l.tb, 8, 6, ring), cat(a[1:], b, c)
		}
	}
	runScenarios(t, []scenario{
		{
			name:  "checkpoint_skips_old_records/position_at_W",
			build: skipsOld(func(_, atW int64) int64 { return atW }),
			want:  &counts{records: 5, skipped: 0, puts: 2, takes: 1, commits: 2},
		},
		{
			name:  "checkpoint_skips_old_records/position_before_W",
			build: skipsOld(func(mid, _ int64) int64 { return mid }),
			want:  &counts{records: 7, skipped: 2, puts: 2, takes: 1, commits: 2},
		},
		{
			name:  "checkpoint_skips_old_records/position_zero",
			build: skipsOld(func(int64, int64) int64 { return 0 }),
			want:  &counts{records: 10, skipped: 5, puts: 2, takes: 1, commits: 2},
		},
		{
			name: "checkpoint_skips_old_records/in_files_without_log_state",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				l.create(0, 1)
				a := l.putCommitted(1, 1, 2)
				st := l.state(l.woid, a)
				st.Logs = nil // a checkpoint that knows no file: scan all, skip <= W
				b := l.putCommitted(1, 2, 1)
				return st, newQueue(l.tb, 4, 0, a), cat(a, b)
			},
			want: &counts{records: 5, skipped: 3, puts: 1, commits: 1},
		},
		{
			name: "checkpoint_of_empty_queue_before_any_record",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				l.create(0, 1)
				st := l.state(0, nil)
				a := l.putCommitted(1, 1, 2)
				return st, nil, a
			},
			want: &counts{records: 3, puts: 2, commits: 1},
		},
		{
			name: "inflight_takes_return_to_head_in_order",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				l.create(0, 1)
				ev := l.putCommitted(1, 1, 8)
				// At W tx10 holds e0 e1, tx11 holds e2, tx12 holds e3 e4
				// (taken in that order); the ring holds e5 e6 e7.
				ring := ev[5:]
				st := l.state(l.woid, ring)
				st.InflightTakes = []eventqueue.InflightTx{
					{Tx: 10, Pointers: ev[0:2]},
					{Tx: 11, Pointers: ev[2:3]},
					{Tx: 12, Pointers: ev[3:5]},
				}
				// After W tx11 takes e5 as well and commits; tx12 takes e6
				// and never commits (no record); tx10 never commits.
				l.takeCommitted(1, 11, ev[2], ev[5])
				return st, newQueue(l.tb, 8, 7, ring), cat(ev[0:2], ev[3:5], ev[6:])
			},
			want: &counts{records: 2, takes: 2, commits: 1, returned: 4},
		},
		{
			// A take in flight at W rolls back after it (no record), and
			// another transaction takes its events again and commits.
			name: "inflight_take_rolled_back_then_retaken_after_checkpoint",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				l.create(0, 1)
				ev := l.putCommitted(1, 1, 5)
				ring := ev[3:]
				st := l.state(l.woid, ring)
				st.InflightTakes = []eventqueue.InflightTx{{Tx: 10, Pointers: ev[0:2]}, {Tx: 11, Pointers: ev[2:3]}}
				// tx 10 rolls back, e0 e1 go back to the head; tx 12 takes
				// e0 and commits; tx 10's e1 and tx 11's e2 come back.
				l.takeCommitted(1, 12, ev[0])
				return st, newQueue(l.tb, 8, 7, ring), ev[1:]
			},
			want: &counts{records: 2, takes: 1, commits: 1, returned: 2},
		},
		{
			name: "inflight_takes_fill_the_queue_exactly",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				l.create(0, 1)
				ev := l.putCommitted(1, 1, 4)
				st := l.state(l.woid, ev[2:])
				st.InflightTakes = []eventqueue.InflightTx{{Tx: 10, Pointers: ev[:2]}}
				return st, newQueue(l.tb, 4, 3, ev[2:]), ev
			},
			want: &counts{records: 0, returned: 2},
		},
		{
			name: "inflight_puts_committed_after_checkpoint",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				l.create(0, 1)
				ring := l.putCommitted(1, 1, 2)
				s5 := l.puts(1, 5, 2) // spilled before W, more puts and commit after
				s6 := l.puts(1, 6, 1) // spilled before W, rolled back after
				s7 := l.puts(1, 7, 1) // spilled before W, never ends
				s9 := l.puts(1, 9, 2) // spilled before W, only the commit after
				st := l.state(l.woid, ring)
				st.InflightPuts = []eventqueue.InflightTx{{Tx: 5, Pointers: s5}, {Tx: 6, Pointers: s6}, {Tx: 7, Pointers: s7}, {Tx: 9, Pointers: s9}}
				p5 := l.put(1, 5)
				q8 := l.putCommitted(1, 8, 1)
				l.rollback(1, 6)
				l.commitPut(1, 5)
				l.commitPut(1, 9)
				return st, newQueue(l.tb, 16, 15, ring), cat(ring, q8, s5, []ptr{p5}, s9)
			},
			want: &counts{records: 6, puts: 6, commits: 3, rollbacks: 1, dropped: 2},
		},
		{
			name: "puts_committed_after_checkpoint_are_taken_after_it",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				l.create(0, 1)
				ring := l.putCommitted(1, 1, 2)
				s := l.puts(1, 2, 2)
				st := l.state(l.woid, ring)
				st.InflightPuts = []eventqueue.InflightTx{{Tx: 2, Pointers: s}}
				l.commitPut(1, 2)
				a := l.putCommitted(1, 3, 2)
				l.takeCommitted(1, 4, ring[0], s[0], a[1])
				return st, newQueue(l.tb, 6, 0, ring), []ptr{ring[1], s[1], a[0]}
			},
			want: &counts{records: 6, puts: 4, takes: 3, commits: 3},
		},
		{
			name: "inflight_take_and_put_counted_in_max_tx_id",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				l.create(0, 1)
				ev := l.putCommitted(1, 1, 2)
				s := l.puts(1, 50, 1)
				st := l.state(l.woid, ev[1:])
				st.MaxTxID = 20
				st.InflightTakes = []eventqueue.InflightTx{{Tx: 40, Pointers: ev[:1]}}
				st.InflightPuts = []eventqueue.InflightTx{{Tx: 50, Pointers: s}}
				return st, newQueue(l.tb, 4, 0, ev[1:]), ev
			},
			want: &counts{records: 0, returned: 1, dropped: 1},
			check: func(t *testing.T, res *Result) {
				if res.MaxTxID != 50 {
					t.Errorf("MaxTxID = %d, want 50", res.MaxTxID)
				}
			},
		},
	})
}

// TestRunTakenDeepInRing: committed takes of events of the checkpointed
// ring are found by a bounded walk from the head, and through the queue's
// index past it (the walk limit is 4 per taken event + 1024).
func TestRunTakenDeepInRing(t *testing.T) {
	const n = 3000
	tests := []struct {
		name    string
		taken   []int // ring indexes taken after W
		absent  int   // pointers taken that are not queued
		missing int
	}{
		{name: "taken_near_head", taken: []int{0, 1, 2, 7}},
		{name: "taken_deep_in_ring", taken: []int{2500}},
		{name: "taken_near_head_and_deep_in_ring", taken: []int{0, 1, 1500, 2999}},
		{name: "taken_at_the_walk_limit", taken: []int{0, 1031}},
		{name: "taken_just_past_the_walk_limit", taken: []int{0, 1032}},
		{name: "taken_everything", taken: func() []int {
			all := make([]int, n)
			for i := range all {
				all[i] = n - 1 - i // in reverse, so the walk keeps going
			}
			return all
		}()},
		{name: "taken_absent_and_deep", taken: []int{2000}, absent: 2, missing: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLogSet(t, 1)
			l.create(0, 1)
			ev := l.putCommitted(1, 1, n)
			st := l.state(l.woid, ev)
			var taken []ptr
			for _, i := range tc.taken {
				taken = append(taken, ev[i])
			}
			for i := range tc.absent {
				taken = append(taken, eventqueue.NewPointer(1, uint32(1<<30+i)))
			}
			l.takeCommitted(1, 2, taken...)
			res, q := l.mustRun(st, newQueue(t, 4096, 4000, ev))
			wantQueue(t, q, without(ev, taken...))
			checkCounts(t, res, counts{records: 2, takes: int64(len(taken)), commits: 1, missing: tc.missing})
		})
	}
}

// TestRunErrors: what Run refuses.
func TestRunErrors(t *testing.T) {
	tests := []struct {
		name  string
		dirs  int
		build func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []string)
		is    error // the error must wrap it, when set
	}{
		{
			name: "missing_referenced_file",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []string) {
				l.create(0, 1)
				a := l.putCommitted(1, 1, 1)
				ring := []ptr{a[0], eventqueue.NewPointer(7, 16)}
				st := l.state(l.woid, ring)
				st.Logs = append(st.Logs, checkpoint.LogState{FileID: 7, Position: 100, Refs: 1})
				return st, newQueue(l.tb, 4, 0, ring), []string{"log-0000000007", "missing"}
			},
		},
		{
			name: "duplicate_file_id_in_two_dirs",
			dirs: 2,
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []string) {
				l.create(0, 3)
				l.create(1, 3)
				return nil, nil, []string{"id 3", "two data dirs"}
			},
		},
		{
			name: "capacity_overflow",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []string) {
				l.create(0, 1)
				l.putCommitted(1, 1, 3)
				return nil, newQueue(l.tb, 2, 0, nil), []string{"capacity 2"}
			},
			is: eventqueue.ErrFull,
		},
		{
			name: "capacity_overflow_after_checkpoint",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []string) {
				l.create(0, 1)
				ring := l.putCommitted(1, 1, 2)
				st := l.state(l.woid, ring)
				l.putCommitted(1, 2, 1)
				return st, newQueue(l.tb, 2, 1, ring), []string{"capacity 2"}
			},
			is: eventqueue.ErrFull,
		},
		{
			name: "capacity_overflow_by_returned_takes",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []string) {
				l.create(0, 1)
				ev := l.putCommitted(1, 1, 3)
				st := l.state(l.woid, ev[1:])
				st.InflightTakes = []eventqueue.InflightTx{{Tx: 5, Pointers: ev[:1]}}
				return st, newQueue(l.tb, 2, 0, ev[1:]), []string{"capacity 2"}
			},
			is: eventqueue.ErrFull,
		},
		{
			name: "unreadable_log_file",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []string) {
				l.create(0, 1)
				l.putCommitted(1, 1, 3)
				l.faults().Add(vfs.Rule{Ops: []vfs.Op{"read", "readat"}, Name: l.path(1)})
				return nil, nil, []string{"log-0000000001"}
			},
			is: vfs.ErrInjected,
		},
		{
			name: "unreadable_log_file_after_its_header",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []string) {
				l.create(0, 1)
				l.putCommitted(1, 1, 3)
				l.faults().Add(vfs.Rule{Ops: []vfs.Op{"read", "readat"}, Name: l.path(1), Off: logfile.HeaderSize})
				return nil, nil, []string{"log-0000000001"}
			},
			is: vfs.ErrInjected,
		},
		{
			// A valid header naming another file: a misplaced file, not
			// damage to salvage (see TestDamagedHeaderIsSalvaged).
			name: "header_of_another_file",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []string) {
				l.create(0, 1)
				l.putCommitted(1, 1, 1)
				b := l.bytes(1)
				copy(b, logfile.AppendFileHeader(nil, 2))
				l.setBytes(1, b)
				return nil, nil, []string{"log-0000000001", "file id 2"}
			},
			is: corrupt.ErrCorrupt,
		},
		{
			name: "unlistable_data_dir",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []string) {
				l.create(0, 1)
				l.faults().Add(vfs.Rule{Ops: []vfs.Op{"list"}, Name: l.dirs[0]})
				return nil, nil, []string{l.dirs[0]}
			},
			is: vfs.ErrInjected,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLogSet(t, max(tc.dirs, 1))
			st, q, msgs := tc.build(l)
			res, _, err := l.run(st, q)
			if err == nil {
				t.Fatalf("Run succeeded (%+v), want an error", res)
			}
			if res != nil {
				t.Errorf("Run returned a result with its error: %+v", res)
			}
			for _, m := range msgs {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q does not wrap %v", err, tc.is)
			}
		})
	}
}

// TestRunTolerates: states that are not errors.
func TestRunTolerates(t *testing.T) {
	runScenarios(t, []scenario{
		{
			name: "missing_unreferenced_file",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				l.create(0, 1)
				a := l.putCommitted(1, 1, 1)
				st := l.state(l.woid, a)
				st.Logs = append(st.Logs, checkpoint.LogState{FileID: 7, Position: 100, Refs: 0, Completes: []uint32{1}})
				st.NextFileID = 8
				return st, newQueue(l.tb, 2, 0, a), a
			},
			check: func(t *testing.T, res *Result) {
				if len(res.Logs) != 1 || res.MaxFileID != 7 {
					t.Errorf("Logs = %+v, MaxFileID = %d; want only file 1, 7", res.Logs, res.MaxFileID)
				}
			},
		},
		{
			name: "missing_data_dir",
			dirs: 2,
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				l.create(0, 1)
				a := l.putCommitted(1, 1, 1)
				l.dirs[1] += "-never-created"
				return nil, nil, a
			},
		},
		{
			name: "no_log_files",
			dirs: 3,
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				return nil, nil, nil
			},
			want: &counts{},
		},
		{
			name: "other_files_in_data_dir",
			build: func(l *logSet) (*checkpoint.State, *eventqueue.Queue, []ptr) {
				l.create(0, 1)
				a := l.putCommitted(1, 1, 1)
				for _, name := range []string{"log-0000000002.corrupt", "log-0000000003.tmp", "log-3", "notes"} {
					l.writeFile(l.dirs[0]+"/"+name, []byte("not a log"), true)
				}
				return nil, nil, a
			},
			check: func(t *testing.T, res *Result) {
				if len(res.Logs) != 1 {
					t.Errorf("Logs = %+v, want only file 1", res.Logs)
				}
			},
		},
	})
}

// TestRunUnfinishedCreate: a log file cut short by a crash inside
// logfile.Create (shorter than a header, or a header of zeros) holds no
// record: Run lists it in Result.Empty, not in Logs, and goes on.
func TestRunUnfinishedCreate(t *testing.T) {
	tests := []struct {
		name    string
		content []byte
	}{
		{"empty_log_file", nil},
		{"half_written_header", logfile.AppendFileHeader(nil, 2)[:9]},
		{"zero_filled_header", make([]byte, logfile.HeaderSize)},
		{"zero_filled_log_file", make([]byte, 4096)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLogSet(t, 2)
			l.create(0, 1)
			a := l.putCommitted(1, 1, 2)
			path := l.dirs[1] + "/" + logfile.LogName(2)
			l.writeFile(path, tc.content, true)
			res, q := l.mustRun(nil, nil)
			wantQueue(t, q, a)
			if !slices.Equal(res.Empty, []string{path}) {
				t.Errorf("Empty = %q, want [%q]", res.Empty, path)
			}
			if len(res.Logs) != 1 || res.Logs[0].ID != 1 {
				t.Errorf("Logs = %+v, want only file 1", res.Logs)
			}

			// A checkpoint that says the file holds queued events cannot
			// be satisfied.
			st := l.state(l.woid, a)
			st.Logs = append(st.Logs, checkpoint.LogState{FileID: 2, Position: logfile.HeaderSize, Refs: 1})
			if _, _, err := l.run(st, newQueue(t, 4, 0, a)); err == nil || !strings.Contains(err.Error(), logfile.LogName(2)) {
				t.Errorf("Run with a checkpoint referring to the empty file: err = %v, want one naming it", err)
			}
		})
	}
}

// TestRunTornTail: a file ending in something that is not a record keeps
// the records before it, and Result says where the valid part ends.
func TestRunTornTail(t *testing.T) {
	tests := []struct {
		name     string
		damage   func(b []byte, lastFrame int64) []byte
		tail     logfile.Tail
		lastGone bool // the last record (a commit) is lost
	}{
		{
			name:   "garbage_appended",
			damage: func(b []byte, _ int64) []byte { return append(b, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3) },
			tail:   logfile.TailTorn,
		},
		{
			name:     "half_written_commit",
			damage:   func(b []byte, last int64) []byte { return b[:last+5] },
			tail:     logfile.TailTorn,
			lastGone: true,
		},
		{
			name: "commit_with_bad_checksum",
			damage: func(b []byte, last int64) []byte {
				b[len(b)-1] ^= 0xff
				return b
			},
			tail:     logfile.TailTorn,
			lastGone: true,
		},
		{
			name:   "zero_filled_tail",
			damage: func(b []byte, _ int64) []byte { return append(b, make([]byte, 5000)...) },
			tail:   logfile.TailClean,
		},
		{
			name:     "commit_zeroed",
			damage:   func(b []byte, last int64) []byte { clear(b[last:]); return b },
			tail:     logfile.TailClean,
			lastGone: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLogSet(t, 2)
			l.create(0, 1)
			l.create(1, 2)
			a := l.putCommitted(1, 1, 2)
			b := l.putCommitted(2, 2, 1)
			c := l.puts(1, 3, 2)
			last := l.size(1)
			l.commitPut(1, 3)
			end := l.size(1)
			l.setBytes(1, tc.damage(l.bytes(1), last))

			res, q := l.mustRun(nil, nil)
			want, wantEnd := cat(a, b, c), end
			if tc.lastGone {
				want, wantEnd = cat(a, b), last
			}
			wantQueue(t, q, want)
			if len(res.Logs) != 2 {
				t.Fatalf("Logs = %+v, want 2 files", res.Logs)
			}
			if got := res.Logs[0]; got.ID != 1 || got.End != wantEnd || got.Tail != tc.tail {
				t.Errorf("Logs[0] = %+v, want file 1 ending at %d with a %v tail", got, wantEnd, tc.tail)
			}
			if got := res.Logs[1]; got.ID != 2 || got.End != l.size(2) || got.Tail != logfile.TailClean {
				t.Errorf("Logs[1] = %+v, want file 2 ending at %d with a clean tail", got, l.size(2))
			}
			if res.Bytes != wantEnd+l.size(2)-2*logfile.HeaderSize {
				t.Errorf("Bytes = %d, want %d", res.Bytes, wantEnd+l.size(2)-2*logfile.HeaderSize)
			}
		})
	}
}

// TestRunTakesFrom: Result.Completes maps each file to the files whose
// events its records complete: the checkpoint's knowledge, plus the files
// every scanned take record points into (old or uncommitted ones too), plus
// the files holding the puts a commit record after the checkpoint commits;
// never a file's own id.
func TestRunTakesFrom(t *testing.T) {
	l := newLogSet(t, 2)
	l.create(0, 1)
	l.create(1, 2)
	a := l.putCommitted(1, 1, 3)
	b := l.putCommitted(2, 2, 2)
	l.takeCommitted(2, 3, a[0], b[0]) // before W: found by rescanning file 2
	s := l.puts(1, 7, 1)              // spilled before W
	ring := []ptr{a[1], a[2], b[1]}
	st := l.state(l.woid, ring)
	st.InflightPuts = []eventqueue.InflightTx{{Tx: 7, Pointers: s}}
	logState(st, 1).Completes = []uint32{9} // only the checkpoint knows
	logState(st, 2).Position = 0
	l.create(0, 3)
	l.takeCommitted(3, 4, a[1], b[1])
	l.take(1, 5, a[2]) // own file, uncommitted
	l.take(2, 6, a[2]) // uncommitted
	l.create(1, 4)
	c := l.puts(4, 8, 1)
	l.create(1, 5)
	l.commitPut(5, 7) // commits the spilled put in file 1
	l.commitPut(5, 8) // commits the put in file 4
	l.create(0, 6)
	d := l.puts(6, 9, 1)
	l.commitPut(6, 9) // same file: no dependency

	res, q := l.mustRun(st, newQueue(t, 8, 2, ring))
	wantQueue(t, q, cat([]ptr{a[2]}, s, c, d))
	wantTakesFrom(t, res, map[uint32][]uint32{1: {9}, 2: {1}, 3: {1, 2}, 5: {1, 4}})
}

// TestRunResult checks the bookkeeping fields of Result.
func TestRunResult(t *testing.T) {
	l := newLogSet(t, 2)
	l.create(1, 4)
	l.create(0, 2)
	l.create(0, 6)
	ring := l.putCommitted(2, 1, 1) // woids 1-2
	st := l.state(l.woid, ring)
	// Rescan tx 1's commit: read, but skipped.
	commitSize := (&logfile.Record{Type: logfile.RecordCommit, CommitType: logfile.RecordPut}).EncodedSize()
	logState(st, 2).Position -= int64(commitSize)
	st.NextFileID, st.MaxTxID = 5, 2
	pos4 := l.size(4)
	ev := l.putCommitted(4, 8, 2) // woids 3-5
	l.putCommitted(6, 3, 1)       // woids 6-7
	l.takeCommitted(2, 5, ev...)  // woids 8-9

	res, q := l.mustRun(st, newQueue(t, 4, 3, ring))
	if q.Size() != 2 {
		t.Errorf("queue holds %v, want tx 1's and tx 3's events", q.Pointers())
	}
	wantLogs := []LogFile{
		{ID: 2, Dir: l.dirs[0], Path: l.path(2), Start: logState(st, 2).Position, End: l.size(2), Size: l.size(2)},
		{ID: 4, Dir: l.dirs[1], Path: l.path(4), Start: pos4, End: l.size(4), Size: l.size(4)},
		{ID: 6, Dir: l.dirs[0], Path: l.path(6), Start: logfile.HeaderSize, End: l.size(6), Size: l.size(6)},
	}
	if !slices.EqualFunc(res.Logs, wantLogs, func(a, b LogFile) bool {
		return a.ID == b.ID && a.Dir == b.Dir && a.Path == b.Path && a.Start == b.Start &&
			a.End == b.End && a.Size == b.Size && a.Tail == b.Tail && a.TailErr == nil && len(a.Skipped) == 0
	}) {
		t.Errorf("Logs =\n %+v\nwant\n %+v", res.Logs, wantLogs)
	}
	var bytes int64
	for _, lf := range wantLogs {
		bytes += lf.End - lf.Start
	}
	if res.Bytes != bytes {
		t.Errorf("Bytes = %d, want %d", res.Bytes, bytes)
	}
	if res.MaxWriteOrderID != 9 || res.MaxTxID != 8 || res.MaxFileID != 6 {
		t.Errorf("MaxWriteOrderID, MaxTxID, MaxFileID = %d, %d, %d, want 9, 8, 6", res.MaxWriteOrderID, res.MaxTxID, res.MaxFileID)
	}
	if res.Duration <= 0 {
		t.Errorf("Duration = %v", res.Duration)
	}
	checkCounts(t, res, counts{records: 8, skipped: 1, puts: 3, takes: 2, commits: 3})

	// A checkpoint newer than every record and file keeps its maxima.
	st2 := l.state(1000, nil)
	st2.NextFileID, st2.MaxTxID = 100, 77
	for i := range st2.Logs {
		st2.Logs[i].Position = 0
	}
	res, q = l.mustRun(st2, nil)
	if res.MaxWriteOrderID != 1000 || res.MaxTxID != 77 || res.MaxFileID != 99 {
		t.Errorf("MaxWriteOrderID, MaxTxID, MaxFileID = %d, %d, %d, want 1000, 77, 99", res.MaxWriteOrderID, res.MaxTxID, res.MaxFileID)
	}
	checkCounts(t, res, counts{records: 9, skipped: 9})
	wantQueue(t, q, nil)
}
