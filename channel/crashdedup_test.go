package channel

import (
	"errors"
	"fmt"
)

// crashDeduped is d on a channel with Config.Dedup on the workload's "id"
// header (every event has its own id, so the model is d's). Its probe, on
// the channel a check reopens, puts again every event whose put commit had
// returned or was in progress at the crash, as a producer that did not
// know whether its commit went through would: none of those that had
// returned may come in again, and no event may be queued twice.
func crashDeduped(d crashDriver) crashDriver {
	return func(r *crashRun, seed uint64, steps int) (string, error) {
		r.cfg.Dedup = Dedup{Header: "id"}
		r.probe = func(c *FileChannel, s crashSnap) error { return dedupProbe(r, c, s) }
		return d(r, seed, steps)
	}
}

// dedupProbe is crashDeduped's probe.
func dedupProbe(r *crashRun, c *FileChannel, s crashSnap) error {
	before, err := r.recovered(c, c.main)
	if err != nil {
		return err
	}
	had := map[int]bool{}
	for _, id := range before {
		had[id] = true
	}
	var retry []int
	for id, st := range s.states {
		if ph := st &^ (takeMask | maybeTaken); ph == putCommitted || ph == putCommitting || ph == putUncertain {
			retry = append(retry, id)
		}
	}
	for len(retry) > 0 {
		k := min(len(retry), 10)
		if err := reputIDs(c, s, retry[:k]); err != nil && !errors.Is(err, ErrChannelFull) {
			return fmt.Errorf("probe: put again: %w", err)
		}
		retry = retry[k:]
	}
	after, err := r.recovered(c, c.main)
	if err != nil {
		return err
	}
	seen := map[int]bool{}
	for _, id := range after {
		if seen[id] {
			return fmt.Errorf("probe: event %d queued twice after its put was retried", id)
		}
		seen[id] = true
		if !had[id] && s.states[id]&^(takeMask|maybeTaken) == putCommitted {
			return fmt.Errorf("probe: event %d, whose put commit had returned, came in again when retried", id)
		}
	}
	return nil
}

// reputIDs puts the events ids again (same id header, same body) in one
// transaction.
func reputIDs(c *FileChannel, s crashSnap, ids []int) error {
	es := make([]Event, len(ids))
	for i, id := range ids {
		es[i] = Event{Headers: crashHeaders(id), Body: eventBody(id, s.prod[id], s.nth[id])}
	}
	return tryPutTx(c, es...)
}
