package channel

import "time"

// Retention keeps committed events in the logs after every group has taken
// them, so that a group can start before "now" or be reset back. A log file
// that no group queues or holds an event in is deleted when it is older than
// MaxAge (if set), or, oldest first, while the logs exceed MaxBytes (if
// set). Only MaxAge: kept for MaxAge. Only MaxBytes: kept up to MaxBytes.
// The zero value keeps today's behaviour: such a file is deleted at once. A
// held file is never deleted for retention.
//
// A file's age is the time since its last record was written (its
// modification time once it is no longer written). MaxBytes counts the
// retained files only (their valid bytes), not the files groups still
// hold. A file whose records complete events of a retained file (take
// records, the commit of puts spilled to it) is retained with it. The
// checks run after each checkpoint; when nothing is written, a checkpoint
// still runs once a retained file reaches MaxAge, so files age out within
// about one CheckpointInterval.
//
// Retained files are the first to go when space runs short: before a put
// is refused for MinimumRequiredSpace or because its data dir is full
// (without its space reserve), the retained files of that dir are deleted,
// oldest first, until the put fits (each with the retained files of other
// dirs whose events its records complete). Stats and the metrics report them
// (RetainedFiles, RetainedBytes, OldestRetained); they are never part of a
// group's backlog.
type Retention struct {
	MaxAge   time.Duration // keep consumed events this long after their commit (0: no age limit)
	MaxBytes int64         // keep consumed log files up to this many bytes of logs (0: no size limit)
}

// makeRoom deletes retained log files of data dir i, oldest first, while
// the dir is full or a put of need bytes would leave it less than
// MinimumRequiredSpace: a put is refused for space only once no retained
// file is left there. A failure is logged; the put's own checks follow.
func (c *FileChannel) makeRoom(i int, need int64) {
	n, err := c.logs.MakeRoom(i, need, c.cfg.MinimumRequiredSpace, c.unheld)
	if err != nil {
		c.log.Error("delete retained log files to make room for a put", "dir", c.logs.DirPath(i), "deleted", n, "err", err)
	}
}
