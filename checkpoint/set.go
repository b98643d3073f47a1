package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/flumego/filechannel/eventqueue"
	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
	"github.com/flumego/filechannel/logfile"
)

// One checkpoint of a channel with consumer groups is a set (doc.go,
// docs/format.md §1.2): the top-level checkpoint of the checkpoint dir (the
// unnamed group's ring, or an empty ring of one slot, and the channel's
// state), the groups catalog, and one checkpoint per named group in its
// group-N subdir, all at one write-order id W. This file holds the set's
// rules: WriteSet writes it in order, OpenSet opens it all or nothing,
// validateSet checks a copy without mapping it (Backup), StaleGroupDirs
// finds the group dirs it no longer lists, and GroupInfo and CatalogGroup
// convert a group's settings between the catalog and the logs' groups
// records.

// Set is a checkpoint set opened by OpenSet.
type Set struct {
	Dir     string
	Top     *Checkpoint // the top-level checkpoint
	State   *State      // Top's
	Catalog *Catalog    // nil: an older release's checkpoint, the unnamed group alone on Top
	// Groups is the named groups' checkpoints, in the catalog's order (by
	// id).
	Groups []GroupCheckpoint
}

// GroupCheckpoint is a named consumer group's checkpoint, opened from its
// group-N subdirectory.
type GroupCheckpoint struct {
	Group      Group  // as the catalog lists it
	Dir        string // GroupDir of the set's dir
	Checkpoint *Checkpoint
	State      *State
}

// GroupError is OpenSet's error about one named group's checkpoint: it does
// not open, or it is at another write-order id than the top-level
// checkpoint. It unwraps to its cause, which matches ErrBadCheckpoint
// unless it is an I/O error or a file a newer release wrote
// (corrupt.ErrUnsupportedFormat).
type GroupError struct {
	Group Group
	Dir   string // the group's checkpoint dir
	Err   error
}

func (e *GroupError) Error() string {
	return fmt.Sprintf("checkpoint of %s: %v", groupLabel(e.Group.ID, e.Group.Name), e.Err)
}

// Unwrap returns the cause.
func (e *GroupError) Unwrap() error { return e.Err }

// CatalogError is OpenSet's error about the catalog of a set whose
// top-level checkpoint opened: it does not decode, or it is at another
// write-order id. Its text is its cause's, which it unwraps to.
type CatalogError struct {
	File string // the catalog's path
	Err  error
}

func (e *CatalogError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *CatalogError) Unwrap() error { return e.Err }

// OpenSet opens the checkpoint set in dir: the top-level checkpoint (Open),
// the groups catalog and the checkpoint of every named group it lists
// (group-N dirs it does not list are ignored). The set is all or nothing:
//
//   - the top level's errors are Open's, as they are;
//   - no catalog: a Set without Catalog nor Groups; the checkpoint is an
//     older release's, the unnamed group alone on the top-level ring;
//   - a catalog at another write-order id than the top level: a
//     *CatalogError matching ErrBadCheckpoint and ErrIncomplete (a crash
//     inside a checkpoint); a damaged catalog: a *CatalogError matching
//     ErrBadCheckpoint and a *corrupt.Error naming the file;
//   - group checkpoints that do not open (damaged, incomplete, missing, at
//     another write-order id): the errors.Join of a *GroupError for each,
//     in id order, matching ErrBadCheckpoint (every group is tried, so that
//     the error names each);
//   - a catalog or group checkpoint a newer release wrote: an error
//     matching corrupt.ErrUnsupportedFormat and not ErrBadCheckpoint; a
//     catalog that is not a regular file: one matching vfs.ErrNotRegular;
//     I/O errors as they are.
//
// On an error nothing is left open; otherwise the caller closes the Set.
func OpenSet(fsys vfs.FS, dir string) (*Set, error) {
	ck, st, err := Open(fsys, dir)
	if err != nil {
		return nil, err
	}
	s := &Set{Dir: dir, Top: ck, State: st}
	if err := s.openGroups(fsys); err != nil {
		if cerr := ck.Close(); cerr != nil {
			return nil, errors.Join(err, cerr)
		}
		return nil, err // as it is: a join of *GroupError stays one
	}
	return s, nil
}

// openGroups opens the catalog and the named groups' checkpoints of s,
// whose top level is open.
func (s *Set) openGroups(fsys vfs.FS) error {
	cat, err := readCatalogIfAny(fsys, s.Dir)
	switch {
	case errors.Is(err, ErrBadCheckpoint):
		return &CatalogError{File: path(s.Dir, CatalogName), Err: err}
	case err != nil || cat == nil:
		return err
	}
	w := s.State.WriteOrderID
	if cat.WriteOrderID != w {
		return &CatalogError{File: path(s.Dir, CatalogName), Err: fmt.Errorf("%w: %w: the group catalog in %s is at write-order id %d, the checkpoint at %d",
			ErrBadCheckpoint, ErrIncomplete, s.Dir, cat.WriteOrderID, w)}
	}
	var groups []GroupCheckpoint
	var errs []error
	for _, g := range cat.Groups {
		if g.ID == 0 {
			continue
		}
		gc, err := openGroupCheckpoint(fsys, s.Dir, g, w)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		groups = append(groups, gc)
	}
	if len(errs) > 0 {
		return errors.Join(append(errs, closeGroups(groups))...)
	}
	s.Catalog, s.Groups = cat, groups
	return nil
}

// openGroupCheckpoint opens the checkpoint of named group g in dir's group
// dir and checks that it is at write-order id w.
func openGroupCheckpoint(fsys vfs.FS, dir string, g Group, w uint64) (GroupCheckpoint, error) {
	gdir := GroupDir(dir, g.ID)
	fail := func(err error) (GroupCheckpoint, error) {
		return GroupCheckpoint{}, &GroupError{Group: g, Dir: gdir, Err: err}
	}
	ck, st, err := Open(fsys, gdir)
	switch {
	case errors.Is(err, ErrNoCheckpoint):
		// The catalog lists the group: its checkpoint is part of the set.
		return fail(fmt.Errorf("%w: the catalog lists the group: %w", ErrBadCheckpoint, err))
	case err != nil:
		return fail(err)
	case st.WriteOrderID != w:
		return fail(errors.Join(fmt.Errorf("%w: %w: it is at write-order id %d, the channel's checkpoint at %d",
			ErrBadCheckpoint, ErrIncomplete, st.WriteOrderID, w), ck.Close()))
	}
	return GroupCheckpoint{Group: g, Dir: gdir, Checkpoint: ck, State: st}, nil
}

// readCatalogIfAny is ReadCatalog with nil for a dir without a catalog.
// Bad bytes are an error wrapping ErrBadCheckpoint.
func readCatalogIfAny(fsys vfs.FS, dir string) (*Catalog, error) {
	cat, err := ReadCatalog(fsys, dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case errors.Is(err, corrupt.ErrCorrupt):
		return nil, fmt.Errorf("%w: %w", ErrBadCheckpoint, err)
	}
	return cat, err
}

// validateSet checks the checkpoint set in dir as the channel's Open
// accepts it: the top-level checkpoint validates (validate) and, if dir has
// a catalog, the catalog decodes and carries the same write-order id W, and
// every group it lists (id >= 1) has a group dir whose checkpoint validates
// and carries W. Its errors wrap ErrBadCheckpoint.
func validateSet(fsys vfs.FS, dir string) error {
	w, err := validate(fsys, dir)
	if err != nil {
		return err
	}
	cat, err := readCatalogIfAny(fsys, dir)
	if err != nil || cat == nil {
		return err
	}
	if cat.WriteOrderID != w {
		return fmt.Errorf("%w: %w", ErrBadCheckpoint, corrupt.New(path(dir, CatalogName), catalogOffWriteID,
			"write-order id %d, checkpoint has %d", cat.WriteOrderID, w))
	}
	for _, g := range cat.Groups {
		if g.ID == 0 {
			continue
		}
		gdir := GroupDir(dir, g.ID)
		gw, err := validate(fsys, gdir)
		if err != nil {
			return fmt.Errorf("group %d: %w", g.ID, err)
		}
		if gw != w {
			return fmt.Errorf("%w: %w", ErrBadCheckpoint, corrupt.New(path(gdir, MetaName), metaOffWriteID,
				"write-order id %d, the top-level checkpoint and %s have %d", gw, CatalogName, w))
		}
	}
	return nil
}

// Group returns the checkpoint of named group id, if the set has one.
func (s *Set) Group(id uint32) (GroupCheckpoint, bool) {
	for _, g := range s.Groups {
		if g.Group.ID == id {
			return g, true
		}
	}
	return GroupCheckpoint{}, false
}

// Close closes every checkpoint of the set.
func (s *Set) Close() error {
	return errors.Join(closeGroups(s.Groups), s.Top.Close())
}

func closeGroups(groups []GroupCheckpoint) error {
	var errs []error
	for _, g := range groups {
		errs = append(errs, g.Checkpoint.Close())
	}
	return errors.Join(errs...)
}

// SetWrite is one named group's part of a set being written: its
// checkpoint and the state to write into it.
type SetWrite struct {
	Name       string // the group's name, for errors
	Checkpoint *Checkpoint
	State      *State
}

// WriteSet writes a checkpoint set into dir in the order that makes it
// valid: every named group's checkpoint (groups), then the catalog cat,
// then the top-level checkpoint top with state st, whose COMPLETE marker
// is written last. Every state and cat must have the same write-order id.
// A crash or an error before the end leaves a set OpenSet refuses as
// incomplete, or the previous one.
func WriteSet(fsys vfs.FS, dir string, top *Checkpoint, st *State, cat *Catalog, groups []SetWrite) error {
	for _, g := range groups {
		if err := g.Checkpoint.Write(g.State); err != nil {
			return fmt.Errorf("group %q: %w", g.Name, err)
		}
	}
	if err := WriteCatalog(fsys, dir, cat); err != nil {
		return err
	}
	return top.Write(st)
}

// StaleGroupDirs returns, ascending, the ids of the group dirs present in
// the checkpoint dir dir that belong to none of the groups live (removed
// groups, or a group whose creation a crash interrupted): the next
// checkpoint set written no longer needs them, and RemoveGroupDir deletes
// them once it is.
func StaleGroupDirs(fsys vfs.FS, dir string, live []uint32) ([]uint32, error) {
	ids, err := ListGroupDirs(fsys, dir)
	if err != nil {
		return nil, err
	}
	keep := make(map[uint32]bool, len(live))
	for _, id := range live {
		keep[id] = true
	}
	var stale []uint32
	for _, id := range ids {
		if !keep[id] {
			stale = append(stale, id)
		}
	}
	return stale, nil
}

// GroupInfo is g's settings as a groups record of the logs lists them.
func (g Group) GroupInfo() logfile.GroupInfo {
	return logfile.GroupInfo{ID: g.ID, Name: g.Name, Since: g.Since, Capacity: uint64(g.Capacity), Policy: g.Policy,
		MaxDeliveries: g.MaxDeliveries, DeadLetter: g.DeadLetter, DeadLetterGroup: g.DeadLetterGroup, Filter: g.Filter,
		OrderKey: g.OrderKey, RetryDelays: g.RetryDelays, LeaseTimeout: g.LeaseTimeout, ExpireAfter: g.ExpireAfter}
}

// DeliveryCounts is g's delivery counts as a map (nil without any).
func (g Group) DeliveryCounts() map[eventqueue.Pointer]uint32 {
	if len(g.Deliveries) == 0 {
		return nil
	}
	m := make(map[eventqueue.Pointer]uint32, len(g.Deliveries))
	for _, d := range g.Deliveries {
		m[eventqueue.Pointer(d.Pointer)] = d.Count
	}
	return m
}

// WaitingDues returns g's waiting events as a map from pointer to due
// time (nil for none).
func (g Group) WaitingDues() map[eventqueue.Pointer]int64 {
	if len(g.Waiting) == 0 {
		return nil
	}
	m := make(map[eventqueue.Pointer]int64, len(g.Waiting))
	for _, w := range g.Waiting {
		m[eventqueue.Pointer(w.Pointer)] = w.Due
	}
	return m
}

// CatalogGroup is the catalog's entry of the group gi (as a groups record
// lists it) with the delivery counts deliveries (Group.Deliveries' order).
func CatalogGroup(gi logfile.GroupInfo, deliveries []Delivery) Group {
	return Group{ID: gi.ID, Name: gi.Name, Since: gi.Since, Capacity: int(gi.Capacity), Policy: gi.Policy,
		MaxDeliveries: gi.MaxDeliveries, DeadLetter: gi.DeadLetter, DeadLetterGroup: gi.DeadLetterGroup,
		Filter: gi.Filter, Deliveries: deliveries,
		OrderKey: gi.OrderKey, RetryDelays: gi.RetryDelays, LeaseTimeout: gi.LeaseTimeout, ExpireAfter: gi.ExpireAfter}
}

// groupLabel is how errors name a consumer group: "consumer group 2
// ("audit")", or "the unnamed consumer group".
func groupLabel(id uint32, name string) string {
	if id == 0 {
		return "the unnamed consumer group"
	}
	return fmt.Sprintf("consumer group %d (%q)", id, name)
}
