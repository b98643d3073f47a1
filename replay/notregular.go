package replay

import (
	"fmt"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/logfile"
)

// NeededNotRegular returns the error (a *logfile.NotRegularError, matching
// vfs.ErrNotRegular) of the first entry of logs named like a log file that
// is not a regular file (logs.NotRegular) and stands where a replay from st
// needs a log file; nil if there is none. The replay never opens such an
// entry (a symbolic link is never followed), so the events of the file it
// replaced would be lost without a word. A replay from st needs
//   - a file the checkpoint lists: one of the channel's log files then,
//     which may hold queued events or records after the checkpoint;
//   - a file with an id at or above the checkpoint's next file id: one the
//     channel may have created after the checkpoint;
//   - with st nil (a full replay, as Rebuild and Repair run), every file:
//     nothing says what the entry stands for.
//
// An entry with another id (a file the channel deleted before the
// checkpoint), or with the id of a log file another data dir holds, is left
// alone: Set.Listed does not list it, and no new log file takes its id.
func NeededNotRegular(logs *logfile.Set, st *checkpoint.State) error {
	held := map[uint32]bool{} // ids of the log files the data dirs hold
	for _, f := range logs.Listed() {
		held[f.ID] = true
	}
	listed := map[uint32]int{} // file id -> queued events per the checkpoint
	var next uint32
	if st != nil {
		for _, l := range st.Logs {
			listed[l.FileID] = l.Refs
			next = max(next, l.FileID+1)
		}
		if st.NextFileID > 0 {
			next = st.NextFileID
		}
	}
	for _, n := range logs.NotRegular() {
		e := &logfile.NotRegularError{NotRegular: n}
		refs, ok := listed[n.ID]
		switch {
		case held[n.ID]:
			continue
		case st == nil:
			e.Need = "a full replay reads every log file"
		case ok && refs > 0:
			e.Need, e.Ours = fmt.Sprintf("log file %s holds %d queued events according to the checkpoint", logfile.LogName(n.ID), refs), true
		case ok:
			e.Need, e.Ours = fmt.Sprintf("log file %s is one the checkpoint lists, which may hold events committed after it", logfile.LogName(n.ID)), true
		case n.ID >= next:
			e.Need = fmt.Sprintf("log file %s is newer than the checkpoint and may hold events committed after it", logfile.LogName(n.ID))
		default:
			continue
		}
		return e
	}
	return nil
}
