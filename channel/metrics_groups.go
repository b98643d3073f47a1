package channel

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// groupCollector exports the per-group metrics, labelled by group ("" for
// the unnamed group). Groups come and go at run time, so it reads the
// groups at each collection instead of registering a collector per group.
type groupCollector struct {
	c                                      *FileChannel
	queued, capacity, inflight, fill       *prometheus.Desc
	taken, rollbacks, dropped, waits, full *prometheus.Desc
	deadLettered, deadRefused, redriven    *prometheus.Desc
	oldestAge, filtered, leasesExpired     *prometheus.Desc
	expired, waiting, parked, skipped      *prometheus.Desc
}

// Reasons in the reason label of group_dropped_events_total.
const (
	dropReasonOldest = "drop_oldest" // a full DropOldest group dropped its oldest
	dropReasonNewest = "full"        // the group missed a put commit: full (DropNewest, or DropOldest with no queued event to drop)
)

func newGroupCollector(c *FileChannel) *groupCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, "", name), help, append([]string{"group"}, labels...), nil)
	}
	return &groupCollector{
		c:            c,
		queued:       desc("group_queue_events", "Events queued for a consumer group: committed, not taken by it."),
		capacity:     desc("group_capacity_events", "A consumer group's capacity."),
		inflight:     desc("group_inflight_take_events", "Events a consumer group's open take transactions hold."),
		fill:         desc("group_fill_ratio", "Events a consumer group holds (queued, taken and uncommitted, put and uncommitted) over its capacity, 0–1."),
		taken:        desc("group_take_success_total", "Events taken by a consumer group's committed transactions."),
		rollbacks:    desc("group_take_rollbacks_total", "A consumer group's take transactions rolled back."),
		dropped:      desc("group_dropped_events_total", "Events a full consumer group lost to its WhenFull policy, by reason (drop_oldest: dropped from its head; full: a put commit it missed).", "reason"),
		waits:        desc("group_put_waits_total", "Put calls that found a Block consumer group full and waited for room, whatever the outcome."),
		full:         desc("group_puts_full_total", "Put calls refused with ErrChannelFull because a Block consumer group stayed full."),
		deadLettered: desc("group_dead_lettered_total", "Events a consumer group moved to its dead-letter group, by reason (max_deliveries: delivered MaxDeliveries times; rejected: Transaction.Reject; expired: queued longer than ExpireAfter).", "reason"),
		deadRefused:  desc("group_dead_letters_refused_total", "Moves of events that reached MaxDeliveries that a full Block dead-letter group refused (each event is delivered again, and refused again at its next rollback or take)."),
		redriven:     desc("group_redriven_total", "Events Redrive moved out of a dead-letter group."),
		filtered:     desc("group_filtered_out_total", "Events of put commits that a consumer group's Filter kept out of it (no match, or an evaluation error)."),
		expired: desc("group_expired_events_total",
			"Events a consumer group did not deliver because they were queued longer than its ExpireAfter: moved to its dead-letter group, or dropped without one."),
		waiting: desc("group_retry_waiting_events",
			"Events of a consumer group waiting for their retry delay (RetryDelays, Transaction.Retry): out of its queue, counted against its capacity."),
		parked: desc("group_order_parked_events",
			"Events of a consumer group with OrderKey parked behind a key another open take transaction holds: out of its queue, counted against its capacity."),
		skipped: desc("group_order_skipped_total",
			"Events a consumer group's takes parked behind a held key (OrderKey), each counted once per hold of its key."),
		leasesExpired: desc("group_leases_expired_total",
			"Take transactions of a consumer group whose LeaseTimeout expired: their events went back to the group, their commit failed."),
		oldestAge: desc("group_oldest_event_age_seconds", "The age of a consumer group's oldest queued event (its queue's head or an event parked behind a held key): seconds since its put committed (its lag); 0 when nothing is queued; "+
			"absent when the event is of a log file older than format version 7 (no time)."),
	}
}

func (g *groupCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{g.queued, g.capacity, g.inflight, g.fill, g.taken, g.rollbacks, g.dropped, g.waits, g.full,
		g.deadLettered, g.deadRefused, g.redriven, g.oldestAge, g.filtered, g.leasesExpired, g.expired, g.waiting, g.parked, g.skipped} {
		ch <- d
	}
}

func (g *groupCollector) Collect(ch chan<- prometheus.Metric) {
	rows := g.rows()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	for _, r := range rows {
		name, n := r.grp.cfg.Name, &r.grp.counts
		gauge(g.queued, float64(r.queued), name)
		gauge(g.capacity, float64(r.grp.cfg.Capacity), name)
		gauge(g.inflight, float64(r.inflight), name)
		gauge(g.fill, float64(r.grp.gate.inUse())/float64(r.grp.cfg.Capacity), name)
		counter(g.taken, float64(n.taken.Load()), name)
		counter(g.rollbacks, float64(n.rollbacks.Load()), name)
		counter(g.dropped, float64(n.oldest.Load()), name, dropReasonOldest)
		counter(g.dropped, float64(n.newest.Load()), name, dropReasonNewest)
		w := r.grp.gate.putWaits()
		counter(g.waits, float64(w.waits), name)
		counter(g.full, float64(w.full), name)
		if r.grp.dlq != nil {
			counter(g.deadLettered, float64(n.deadMax.Load()), name, deadReasonMax)
			counter(g.deadLettered, float64(n.deadRejected.Load()), name, deadReasonRejected)
			counter(g.deadLettered, float64(n.deadExpired.Load()), name, deadReasonExpired)
			counter(g.deadRefused, float64(n.deadRefused.Load()), name)
		}
		if r.grp.cfg.Filter != "" {
			counter(g.filtered, float64(n.filtered.Load()), name)
		}
		if r.grp.cfg.LeaseTimeout > 0 || n.leasesExpired.Load() > 0 {
			counter(g.leasesExpired, float64(n.leasesExpired.Load()), name)
		}
		if r.grp.retrying() || r.waiting > 0 {
			gauge(g.waiting, float64(r.waiting), name)
		}
		if r.grp.keyed() || r.parked > 0 {
			gauge(g.parked, float64(r.parked), name)
			counter(g.skipped, float64(r.skipped), name)
		}
		if r.grp.cfg.ExpireAfter > 0 || n.deadExpired.Load()+n.expiredDropped.Load() > 0 {
			counter(g.expired, float64(n.deadExpired.Load()+n.expiredDropped.Load()), name)
		}
		if r.grp.dlqOnly {
			counter(g.redriven, float64(n.redriven.Load()), name)
		}
		switch t := g.c.oldestTime(r.grp, r.lag); {
		case !r.lag.queued():
			gauge(g.oldestAge, 0, name)
		case !t.IsZero():
			gauge(g.oldestAge, max(time.Since(t).Seconds(), 0), name)
		}
	}
}

// groupRow is one group's sizes at a scrape.
type groupRow struct {
	grp              *groupState
	queued, inflight int
	waiting          int // for their retry delay
	parked           int // behind a held key (OrderKey)
	skipped          int64
	lag              lagHeads // for its oldest queued event
}

// rows reads, under queueMu, each group's queued and in-flight events
// (none once the channel released its files).
func (g *groupCollector) rows() []groupRow {
	c := g.c
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	if c.released {
		return nil
	}
	rows := make([]groupRow, 0, len(c.groups))
	for _, grp := range c.groups {
		rows = append(rows, groupRow{grp: grp, queued: grp.queue.Size(), inflight: grp.inflight.Len(), waiting: grp.waitingLen(),
			parked: grp.order.parked, skipped: grp.order.skips, lag: c.lagHeadsLocked(grp)})
	}
	return rows
}
