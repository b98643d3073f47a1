package main

import (
	"time"
)

// A meter is one throughput measurement that can run in slices: the
// measurements a target compares run interleaved, a slice of each in turn,
// round after round, so that other work on the machine (the disk and the
// two cores are shared) weighs on all of them alike.
type meter struct {
	res Result
	// run works until budget passes or max events are done (whichever
	// comes first, at least one unit of work) and returns the events done.
	run func(budget time.Duration, max int64) (int64, error)
	// max caps the meter's events over all rounds (0 = no cap).
	max int64
	// before, if set, runs before each of the meter's slices, untimed
	// (to drop files from the page cache, say).
	before func() error
}

// interleave runs the meters in rounds of budget/rounds each and adds
// their results: the events and the time summed over the rounds. Odd
// rounds run the meters in the reverse order, so that no meter always
// follows the same one (and inherits its leftover work: a garbage
// collection it started, writes the kernel or an in-process server still
// has to do).
func (b *bench) interleave(rounds int, budget time.Duration, ms []*meter) error {
	slice := budget / time.Duration(rounds)
	var elapsed = make([]time.Duration, len(ms))
	for r := range rounds {
		for j := range ms {
			i := j
			if r%2 == 1 {
				i = len(ms) - 1 - j
			}
			m := ms[i]
			limit := int64(1 << 62)
			if m.max > 0 {
				limit = (m.max - m.res.Events) / int64(rounds-r)
			}
			if m.before != nil {
				if err := m.before(); err != nil {
					return err
				}
			}
			start := time.Now()
			n, err := m.run(slice, limit)
			elapsed[i] += time.Since(start)
			if err != nil {
				return err
			}
			m.res.Events += n
		}
	}
	for i, m := range ms {
		m.res.Seconds = elapsed[i].Seconds()
		if m.res.Bytes == 0 {
			m.res.Bytes = m.res.Events * 1024
		}
		b.add(m.res)
	}
	return nil
}

// withRounds wraps m's run to add the events per second of each of its
// slices to m.res.RoundEventsPerSec, for the spread of a ratio over the
// rounds.
func withRounds(m *meter) *meter {
	run := m.run
	m.run = func(budget time.Duration, max int64) (int64, error) {
		start := time.Now()
		n, err := run(budget, max)
		if s := time.Since(start).Seconds(); s > 0 {
			m.res.RoundEventsPerSec = append(m.res.RoundEventsPerSec, float64(n)/s)
		}
		return n, err
	}
	return m
}

// until reports whether a loop that has done n events of max, and started
// at start, may do step more within budget. The first step always runs.
func until(start time.Time, budget time.Duration, n, step, max int64) bool {
	return n == 0 || (n+step <= max && time.Since(start) < budget)
}
