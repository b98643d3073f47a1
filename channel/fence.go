package channel

import "fmt"

// A fenced take transaction can no longer take or commit: something else
// decided what became of the events it held, under queueMu, and its Take
// and Commit return the error of that reason and change nothing; its
// Rollback (or the Commit that failed) ends it, returning nothing (the
// events were already dealt with). The reasons:
//
//   - fenceReset: ResetGroup rebuilt the group's queue while the
//     transaction held its events (they do not come back: the reset
//     decided the queue), ErrGroupReset;
//   - fenceLease: the transaction's lease expired (lease.go): its events
//     went back to the group's head as after a rollback, ErrLeaseExpired.
//
// A fence is decided under queueMu against the transaction's commit: a
// commit checks it (claimCommit) under commitMu shared, and both reasons
// are set under commitMu exclusive, so a commit is either wholly before a
// fence or refused by it.
type fence uint8

const (
	fenceNone fence = iota
	fenceReset
	fenceLease
)

// errFenced is the error of a transaction of g fenced for reason f.
func errFenced(g *groupState, f fence) error {
	if f == fenceLease {
		return fmt.Errorf("%w: the transaction held events of %s longer than its LeaseTimeout %v: they went back to the group; this transaction changes nothing",
			ErrLeaseExpired, groupLabel(g.cfg.Name), g.cfg.LeaseTimeout)
	}
	return fmt.Errorf("%w: %s was reset while this transaction held its events; roll it back", ErrGroupReset, groupLabel(g.cfg.Name))
}

// fencedLocked returns why transaction tx of g is fenced (fenceNone: it
// is not); the caller holds queueMu.
func (g *groupState) fencedLocked(tx uint64) fence { return g.fenced[tx] }

// fenceLocked fences transaction tx of g for reason f; the caller holds
// queueMu.
func (g *groupState) fenceLocked(tx uint64, f fence) {
	if g.fenced == nil {
		g.fenced = map[uint64]fence{}
	}
	g.fenced[tx] = f
}

// groupFenced is fencedLocked under queueMu.
func (c *FileChannel) groupFenced(g *groupState, tx uint64) fence {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	return g.fencedLocked(tx)
}

// claimCommit is a take commit's check, under commitMu shared, that tx
// may commit: it returns tx's fence, or, if there is none, ends tx's
// lease, so that from here on only the commit decides the events' fate
// (if its write fails, it returns them itself).
func (c *FileChannel) claimCommit(g *groupState, tx uint64) fence {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	if f := g.fencedLocked(tx); f != fenceNone {
		return f
	}
	c.endLeaseLocked(g, tx)
	return fenceNone
}

// settle ends tx's lease and forgets its fence as the transaction ends,
// and returns that fence: fenceNone when the transaction still has its
// events to return.
func (c *FileChannel) settle(g *groupState, tx uint64) fence {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	c.endLeaseLocked(g, tx)
	f := g.fencedLocked(tx)
	if f != fenceNone {
		delete(g.fenced, tx)
	}
	return f
}
