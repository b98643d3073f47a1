package kafka

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flumego/filechannel/internal/promreg"
)

// The metrics have the FileChannel's names (namespace filechannel, label
// channel_name) where they mean the same thing.
const metricsNamespace = "filechannel"

// Label values.
const (
	typePut  = "put"
	typeTake = "take"

	reasonTooLarge        = "too_large"
	reasonTransactionFull = "transaction_full"
	reasonCanceled        = "canceled"
	reasonClosed          = "closed"
	reasonMisuse          = "misuse"
	reasonKafka           = "kafka"
	reasonReset           = "group_reset"
)

type metrics struct {
	putAttempts, takeAttempts prometheus.Counter
	putSuccess, takeSuccess   prometheus.Counter
	putErrors, takeErrors     *prometheus.CounterVec
	rollbacks, commitErrors   *prometheus.CounterVec
	commitSeconds             *prometheus.HistogramVec
	commitEvents              *prometheus.HistogramVec

	groupTaken, groupRollbacks *prometheus.CounterVec
	groupInflight              *prometheus.GaugeVec

	all []prometheus.Collector
	reg prometheus.Registerer
}

// groupMetrics are one group's children of the group metrics.
type groupMetrics struct {
	taken, rollbacks prometheus.Counter
	inflight         prometheus.Gauge
}

func newMetrics(*Channel) *metrics {
	m := &metrics{}
	counter := func(name, help string) prometheus.Counter {
		x := prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Name: name, Help: help})
		m.all = append(m.all, x)
		return x
	}
	vec := func(name, help, label string, values ...string) *prometheus.CounterVec {
		x := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: name, Help: help}, []string{label})
		for _, v := range values {
			x.WithLabelValues(v) // present at 0
		}
		m.all = append(m.all, x)
		return x
	}
	hist := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		x := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metricsNamespace, Name: name, Help: help, Buckets: buckets}, []string{"type"})
		m.all = append(m.all, x)
		return x
	}
	m.putAttempts = counter("put_attempts_total", "Put calls.")
	m.putSuccess = counter("put_success_total", "Events put by committed transactions.")
	m.putErrors = vec("put_errors_total", "Put calls that failed, by reason.", "reason",
		reasonTooLarge, reasonTransactionFull, reasonCanceled, reasonClosed, reasonMisuse)
	m.takeAttempts = counter("take_attempts_total", "Take and TakeContext calls.")
	m.takeSuccess = counter("take_success_total", "Events taken by committed transactions.")
	m.takeErrors = vec("take_errors_total", "Take calls that failed, by reason (kafka: a fetch error).", "reason",
		reasonTransactionFull, reasonCanceled, reasonClosed, reasonMisuse, reasonKafka, reasonReset)
	m.rollbacks = vec("rollbacks_total", "Transactions rolled back by Rollback, by type (put or take).", "type", typePut, typeTake)
	m.commitErrors = vec("commit_errors_total", "Commits that failed, by type.", "type", typePut, typeTake)
	m.commitSeconds = hist("commit_duration_seconds", "Time from a transaction's first put or take to its commit's end, by type.",
		prometheus.ExponentialBuckets(100e-6, 2, 18))
	m.commitEvents = hist("commit_events", "Events per committed transaction, by type.", []float64{1, 10, 100, 1000, 10000})
	group := func(name, help string) *prometheus.CounterVec {
		x := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: name, Help: help}, []string{"group"})
		m.all = append(m.all, x)
		return x
	}
	m.groupTaken = group("group_take_success_total", "Events taken by a consumer group's committed transactions.")
	m.groupRollbacks = group("group_take_rollbacks_total", "A consumer group's take transactions rolled back.")
	m.groupInflight = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "group_inflight_take_events",
		Help: "Events a consumer group's open take transactions hold."}, []string{"group"})
	m.all = append(m.all, m.groupInflight)
	return m
}

func (m *metrics) group(name string) groupMetrics {
	return groupMetrics{
		taken:     m.groupTaken.WithLabelValues(name),
		rollbacks: m.groupRollbacks.WithLabelValues(name),
		inflight:  m.groupInflight.WithLabelValues(name),
	}
}

func (m *metrics) observeCommit(typ string, start time.Time, n int) {
	m.commitSeconds.WithLabelValues(typ).Observe(time.Since(start).Seconds())
	m.commitEvents.WithLabelValues(typ).Observe(float64(n))
}

// register registers every collector on reg, labelled with the channel's
// name. On failure it unregisters what it registered.
func (m *metrics) register(reg prometheus.Registerer, name string) error {
	r, err := promreg.Register(reg, name, m.all)
	if errors.Is(err, promreg.ErrNameTaken) {
		return fmt.Errorf("filechannel/kafka: register metrics: a channel named %q is already registered on this Registerer; give each channel its own Config.Name: %w", name, err)
	}
	if err != nil {
		return fmt.Errorf("filechannel/kafka: register metrics: %w", err)
	}
	m.reg = r
	return nil
}

// unregister removes every collector from the Registerer, so that a channel
// reopened on it can register again.
func (m *metrics) unregister() {
	promreg.Unregister(m.reg, m.all)
	m.reg = nil
}
