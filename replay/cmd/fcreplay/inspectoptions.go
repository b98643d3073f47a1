package main

import (
	"fmt"
	"strings"

	"github.com/flumego/filechannel/logfile"
)

// takeOptionFacts sets j's take options from the group's info.
func takeOptionFacts(j *groupJSON, gi *logfile.GroupInfo) {
	j.OrderKey = gi.OrderKey
	for _, d := range gi.RetryDelays {
		j.RetryDelays = append(j.RetryDelays, d.String())
	}
	if gi.LeaseTimeout > 0 {
		j.LeaseTimeout = gi.LeaseTimeout.String()
	}
	if gi.ExpireAfter > 0 {
		j.ExpireAfter = gi.ExpireAfter.String()
	}
}

// takeOptionNotes is the text line of g's take options ("" without any).
func takeOptionNotes(g *groupJSON) string {
	var notes []string
	if g.OrderKey != "" {
		notes = append(notes, fmt.Sprintf("order key %q", g.OrderKey))
	}
	if len(g.RetryDelays) > 0 {
		notes = append(notes, "retry delays "+strings.Join(g.RetryDelays, ", "))
	}
	if g.LeaseTimeout != "" {
		notes = append(notes, "lease timeout "+g.LeaseTimeout)
	}
	if g.ExpireAfter != "" {
		notes = append(notes, "expire after "+g.ExpireAfter)
	}
	return strings.Join(notes, "; ")
}

// pseudoTxNotes is the text line of the events g's checkpoint lists in
// flight under a pseudo transaction, not a take ("" without any).
func pseudoTxNotes(g *groupJSON) string {
	var notes []string
	if g.InflightWaiting > 0 {
		notes = append(notes, fmt.Sprintf("%s listed in flight at the checkpoint as waitingTx (waiting for their retry delay, not taken)",
			plural(int64(g.InflightWaiting), "event")))
	}
	if g.InflightParked > 0 {
		notes = append(notes, fmt.Sprintf("%s listed in flight at the checkpoint as parkedTx (parked behind a held key, not taken)",
			plural(int64(g.InflightParked), "event")))
	}
	return strings.Join(notes, "; ")
}

// pseudoTxTotals is what the in-flight line adds for the events listed
// under a pseudo transaction ("" without any).
func pseudoTxTotals(r *inspectJSON) string {
	if r.InflightWaiting == 0 && r.InflightParked == 0 {
		return ""
	}
	return fmt.Sprintf(" (and %d waiting for their retry delay, %d parked behind a held key: not taken)", r.InflightWaiting, r.InflightParked)
}
