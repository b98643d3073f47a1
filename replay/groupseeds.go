package replay

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// A checkpoint of a channel with consumer groups is a set (docs/format.md
// §1.2): the top-level checkpoint of the checkpoint dir (the unnamed
// group's ring, or an empty ring of one slot, and the channel's state), the
// groups catalog, and one checkpoint per named group in its group-N
// subdir, all at one write-order id W. This file opens the groups' part of
// such a set and turns it into Run's seeds.

// GroupCheckpoint is a named consumer group's checkpoint, opened from its
// group-N subdirectory.
type GroupCheckpoint struct {
	Info       logfile.GroupInfo // as the catalog lists it
	Dir        string            // checkpoint.GroupDir of the checkpoint dir
	Checkpoint *checkpoint.Checkpoint
	State      *checkpoint.State
}

// GroupCheckpointError is the error of OpenGroupCheckpoints about one
// named group's checkpoint: it does not open, or it is at another
// write-order id than the top-level checkpoint. It unwraps to its cause,
// which matches checkpoint.ErrBadCheckpoint unless it is an I/O error or a
// file a newer release wrote (corrupt.ErrUnsupportedFormat).
type GroupCheckpointError struct {
	Group logfile.GroupInfo
	Dir   string // the group's checkpoint dir
	Err   error
}

func (e *GroupCheckpointError) Error() string {
	return fmt.Sprintf("checkpoint of %s: %v", groupName(e.Group.ID, e.Group.Name), e.Err)
}

// Unwrap returns the cause.
func (e *GroupCheckpointError) Unwrap() error { return e.Err }

// OpenGroupCheckpoints opens the consumer groups' part of the checkpoint
// set in dir, whose top-level checkpoint was opened with state st: the
// groups catalog and the checkpoint of every named group it lists (group-N
// dirs it does not list are ignored). The set is all or nothing, as the
// channel's Open uses it:
//
//   - no catalog: nil, nil, nil; the checkpoint is an older release's, the
//     unnamed group alone on the top-level ring;
//   - a catalog at another write-order id than st, or a group checkpoint
//     that is: an error matching checkpoint.ErrBadCheckpoint and
//     checkpoint.ErrIncomplete (a crash inside a checkpoint);
//   - a damaged catalog: an error matching checkpoint.ErrBadCheckpoint and
//     a *corrupt.Error naming the file;
//   - group checkpoints that do not open (damaged, incomplete, missing):
//     the errors.Join of a *GroupCheckpointError for each, in id order,
//     matching checkpoint.ErrBadCheckpoint (every group is tried, so that
//     the error names each);
//   - a catalog or group checkpoint a newer release wrote: an error
//     matching corrupt.ErrUnsupportedFormat and not ErrBadCheckpoint; a
//     catalog that is not a regular file: one matching vfs.ErrNotRegular;
//     I/O errors as they are.
//
// On an error no checkpoint is left open; otherwise the caller closes
// every GroupCheckpoint's Checkpoint (CloseGroupCheckpoints).
func OpenGroupCheckpoints(fsys vfs.FS, dir string, st *checkpoint.State) (*checkpoint.Catalog, []GroupCheckpoint, error) {
	cat, err := checkpoint.ReadCatalog(fsys, dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, nil
	case errors.Is(err, corrupt.ErrCorrupt):
		return nil, nil, fmt.Errorf("%w: %w", checkpoint.ErrBadCheckpoint, err)
	case err != nil:
		return nil, nil, err
	}
	if cat.WriteOrderID != st.WriteOrderID {
		return nil, nil, fmt.Errorf("%w: %w: the group catalog in %s is at write-order id %d, the checkpoint at %d",
			checkpoint.ErrBadCheckpoint, checkpoint.ErrIncomplete, dir, cat.WriteOrderID, st.WriteOrderID)
	}
	var groups []GroupCheckpoint
	var errs []error
	for _, g := range cat.Groups {
		if g.ID == 0 {
			continue
		}
		gc, err := openGroupCheckpoint(fsys, dir, CatalogGroupInfo(g), st.WriteOrderID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		groups = append(groups, gc)
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(append(errs, CloseGroupCheckpoints(groups))...)
	}
	return cat, groups, nil
}

// openGroupCheckpoint opens the checkpoint of named group g in dir's
// group dir and checks that it is at write-order id w.
func openGroupCheckpoint(fsys vfs.FS, dir string, g logfile.GroupInfo, w uint64) (GroupCheckpoint, error) {
	gdir := checkpoint.GroupDir(dir, g.ID)
	fail := func(err error) (GroupCheckpoint, error) {
		return GroupCheckpoint{}, &GroupCheckpointError{Group: g, Dir: gdir, Err: err}
	}
	ck, st, err := checkpoint.Open(fsys, gdir)
	switch {
	case errors.Is(err, checkpoint.ErrNoCheckpoint):
		// The catalog lists the group: its checkpoint is part of the set.
		return fail(fmt.Errorf("%w: the catalog lists the group: %w", checkpoint.ErrBadCheckpoint, err))
	case err != nil:
		return fail(err)
	case st.WriteOrderID != w:
		return fail(errors.Join(fmt.Errorf("%w: %w: it is at write-order id %d, the channel's checkpoint at %d",
			checkpoint.ErrBadCheckpoint, checkpoint.ErrIncomplete, st.WriteOrderID, w), ck.Close()))
	}
	return GroupCheckpoint{Info: g, Dir: gdir, Checkpoint: ck, State: st}, nil
}

// CloseGroupCheckpoints closes the checkpoints of groups.
func CloseGroupCheckpoints(groups []GroupCheckpoint) error {
	var errs []error
	for _, g := range groups {
		errs = append(errs, g.Checkpoint.Close())
	}
	return errors.Join(errs...)
}

// GroupSeeds returns Run's Options.Groups for the checkpoint set of the
// top-level checkpoint ck (opened with state st), its catalog cat and its
// named groups' checkpoints (OpenGroupCheckpoints): a seed per group the
// catalog lists, in its order (by id), each with a queue over its ring
// (the unnamed group's over ck) that counts the pointers per log file as
// its log states do, and with its takes in flight at the checkpoint. With
// no catalog it returns nil: Run then seeds the unnamed group alone, from
// Options.Queue. A catalog that lists no group gives an empty, non-nil
// slice: no group.
func GroupSeeds(ck *checkpoint.Checkpoint, st *checkpoint.State, cat *checkpoint.Catalog, groups []GroupCheckpoint) ([]GroupSeed, error) {
	if cat == nil {
		return nil, nil
	}
	byID := make(map[uint32]GroupCheckpoint, len(groups))
	for _, g := range groups {
		byID[g.Info.ID] = g
	}
	seeds := make([]GroupSeed, 0, len(cat.Groups))
	for _, g := range cat.Groups {
		info, ring, gst := CatalogGroupInfo(g), ck, st
		if g.ID != 0 {
			gc, ok := byID[g.ID]
			if !ok {
				return nil, fmt.Errorf("no checkpoint for %s", groupName(g.ID, g.Name))
			}
			ring, gst = gc.Checkpoint, gc.State
		}
		q, err := ringQueue(ring, gst)
		if err != nil {
			return nil, fmt.Errorf("queue of %s: %w", groupName(g.ID, g.Name), err)
		}
		seeds = append(seeds, GroupSeed{Info: info, Queue: q, Inflight: gst.InflightTakes, Deliveries: CatalogDeliveries(g)})
	}
	return seeds, nil
}

// ringQueue builds the queue the channel builds over a checkpoint's ring:
// from its head and size, with the per-file counts of its log states.
func ringQueue(ck *checkpoint.Checkpoint, st *checkpoint.State) (*eventqueue.Queue, error) {
	refs := map[uint32]int{}
	for _, l := range st.Logs {
		if l.Refs > 0 {
			refs[l.FileID] = l.Refs
		}
	}
	return eventqueue.New(ck, ck.Capacity(), st.Head, st.Size, refs)
}

// CatalogGroupInfo is g, as the checkpoint catalog records it, as a groups
// record lists it.
func CatalogGroupInfo(g checkpoint.Group) logfile.GroupInfo {
	return logfile.GroupInfo{ID: g.ID, Name: g.Name, Since: g.Since, Capacity: uint64(g.Capacity), Policy: g.Policy,
		MaxDeliveries: g.MaxDeliveries, DeadLetter: g.DeadLetter, DeadLetterGroup: g.DeadLetterGroup}
}

// CatalogDeliveries is g's delivery counts as a map (nil without any).
func CatalogDeliveries(g checkpoint.Group) map[eventqueue.Pointer]uint32 {
	if len(g.Deliveries) == 0 {
		return nil
	}
	m := make(map[eventqueue.Pointer]uint32, len(g.Deliveries))
	for _, d := range g.Deliveries {
		m[eventqueue.Pointer(d.Pointer)] = d.Count
	}
	return m
}

// groupName is how errors and problems name a consumer group: "consumer
// group 2 ("audit")", or "the unnamed consumer group".
func groupName(id uint32, name string) string {
	if id == 0 {
		return "the unnamed consumer group"
	}
	return fmt.Sprintf("consumer group %d (%q)", id, name)
}
