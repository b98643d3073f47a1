package replay

import (
	"fmt"

	"github.com/flumego/filechannel/checkpoint"
	"github.com/flumego/filechannel/eventqueue"
)

// A checkpoint of a channel with consumer groups is a set
// (checkpoint.OpenSet has its rules). This file turns an opened set into
// Run's seeds.

// GroupSeeds returns Run's Options.Groups for the checkpoint set s
// (checkpoint.OpenSet): a seed per group its catalog lists, in its order
// (by id), each with a queue over its ring (the unnamed group's over the
// top-level checkpoint) that counts the pointers per log file as its log
// states do, and with its takes in flight at the checkpoint. With no
// catalog it returns nil: Run then seeds the unnamed group alone, from
// Options.Queue. A catalog that lists no group gives an empty, non-nil
// slice: no group.
func GroupSeeds(s *checkpoint.Set) ([]GroupSeed, error) {
	if s.Catalog == nil {
		return nil, nil
	}
	seeds := make([]GroupSeed, 0, len(s.Catalog.Groups))
	for _, g := range s.Catalog.Groups {
		ring, gst := s.Top, s.State
		if g.ID != 0 {
			gc, ok := s.Group(g.ID)
			if !ok {
				return nil, fmt.Errorf("no checkpoint for %s", groupName(g.ID, g.Name))
			}
			ring, gst = gc.Checkpoint, gc.State
		}
		q, err := ringQueue(ring, gst)
		if err != nil {
			return nil, fmt.Errorf("queue of %s: %w", groupName(g.ID, g.Name), err)
		}
		seeds = append(seeds, GroupSeed{Info: g.GroupInfo(), Queue: q, Inflight: gst.InflightTakes, Deliveries: g.DeliveryCounts(),
			Waiting: g.WaitingDues()})
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

// groupName is how errors and problems name a consumer group: "consumer
// group 2 ("audit")", or "the unnamed consumer group".
func groupName(id uint32, name string) string {
	if id == 0 {
		return "the unnamed consumer group"
	}
	return fmt.Sprintf("consumer group %d (%q)", id, name)
}
