package channel

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
	"github.com/flumego/filechannel/replay"
)

// TestErrorsSayEachVerbOnce: an error passed up through logfile or
// checkpoint and the channel names its operation once, with the file it
// failed on; each layer adds only what the one below does not know
// ("create log 1 in /d: create /d/log-0000000001: ..." said create twice,
// once more with the channel's "create log 1 in /d").
func TestErrorsSayEachVerbOnce(t *testing.T) {
	rule := func(op vfs.Op, name string) vfs.Rule { return vfs.Rule{Ops: []vfs.Op{op}, Name: name} }
	for _, tc := range []struct {
		name string
		// run returns the error of the call that meets rule; it adds the
		// rule with ff.Add when that call is next.
		run  func(t *testing.T, ff *vfs.FaultFS, cfg Config, rule vfs.Rule) error
		rule vfs.Rule
		want []string // in the message
	}{
		{
			name: "create_checkpoint", rule: rule(vfs.OpCreate, checkpoint.CheckpointName),
			run:  openFailing,
			want: []string{"filechannel: full replay: create checkpoint in /fc/checkpoint: "},
		},
		{
			name: "sync_new_checkpoint", rule: rule(vfs.OpSync, checkpoint.CheckpointName),
			run:  openFailing,
			want: []string{"create checkpoint in /fc/checkpoint: ", "sync /fc/checkpoint/checkpoint: "},
		},
		{
			name: "create_checkpoint_for_a_new_capacity", rule: rule(vfs.OpCreate, checkpoint.CheckpointName),
			run: func(t *testing.T, ff *vfs.FaultFS, cfg Config, rule vfs.Rule) error {
				mustOpen(t, cfg).Close()
				// The old checkpoint is gone; the next Open replays the logs.
				expectProblems(t, replay.ProblemCheckpointMissing)
				cfg.Capacity++
				return openFailing(t, ff, cfg, rule)
			},
			want: []string{"change capacity from 500 to 501: create checkpoint in /fc/checkpoint: "},
		},
		{
			name: "create_log", rule: rule(vfs.OpCreate, logfile.LogName(1)),
			run:  openFailing,
			want: []string{"filechannel: create log 1 in /fc/data0: "},
		},
		{
			name: "write_new_log_header", rule: rule(vfs.OpWriteAt, logfile.LogName(1)),
			run:  openFailing,
			want: []string{"create log 1 in /fc/data0: ", "writeat /fc/data0/log-0000000001: "},
		},
		{
			// The first sync of data0 publishes its channel.id.
			name: "sync_new_log_dir", rule: vfs.Rule{Ops: []vfs.Op{vfs.OpSyncDir}, Name: "data0", Skip: 1},
			run:  openFailing,
			want: []string{"create log 1 in /fc/data0: ", "syncdir /fc/data0: "},
		},
		{
			name: "write_channel_id", rule: rule(vfs.OpSyncDir, "data0"),
			run:  openFailing,
			want: []string{"filechannel: record channel id: write /fc/data0/channel.id: ", "syncdir /fc/data0: "},
		},
		{
			name: "create_log_on_roll", rule: rule(vfs.OpCreate, logfile.LogName(2)),
			run: func(t *testing.T, ff *vfs.FaultFS, cfg Config, rule vfs.Rule) error {
				c := mustOpen(t, cfg)
				defer c.Close()
				ff.Add(rule)
				for i := 0; ; i++ {
					tx, err := c.Begin()
					if err != nil {
						return err
					}
					if err := tx.Put(Event{Body: make([]byte, 1000)}); err != nil {
						return err
					}
					if err := tx.Commit(); err != nil {
						return err
					}
					if i > 10 {
						t.Fatal("no roll after 10 KB of puts with MaxFileSize 4096")
					}
				}
			},
			want: []string{"create log 2 in /fc/data0: "},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ff := vfs.NewFaultFS(vfs.NewMem())
			err := tc.run(t, ff, memConfig(ff, 1), tc.rule)
			if !errors.Is(err, vfs.ErrInjected) {
				t.Fatalf("error %v, want the injected fault", err)
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
			for _, verb := range []string{"create", "open", "write", "sync", "remove", "filechannel"} {
				if n := len(regexp.MustCompile(`\b`+verb).FindAllString(msg, -1)); n > 1 {
					t.Errorf("error %q says %q %d times", msg, verb, n)
				}
			}
		})
	}
}

// openFailing opens cfg with rule in force and returns Open's error (closing
// a channel that opened).
func openFailing(t *testing.T, ff *vfs.FaultFS, cfg Config, rule vfs.Rule) error {
	ff.Add(rule)
	c, err := Open(cfg)
	if err == nil {
		c.Close()
	}
	return err
}
