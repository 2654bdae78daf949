package leaderprom

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/clock"
)

var (
	leaderDesc = prometheus.NewDesc("leaderaware_leader",
		"1 while a decorated job of this replica leads the lease, else 0.", []string{"lease"}, nil)
	tokenDesc = prometheus.NewDesc("leaderaware_term_token",
		"Fencing token of this replica's current or last term of the lease.", []string{"lease"}, nil)
	electionsDesc = prometheus.NewDesc("leaderaware_elections_total",
		"Terms of the lease this replica won.", []string{"lease"}, nil)
	demotionsDesc = prometheus.NewDesc("leaderaware_demotions_total",
		"Terms of the lease this replica's decorated jobs ended, by cause.", []string{"lease", "cause"}, nil)
	trustDesc = prometheus.NewDesc("leaderaware_trust_remaining_seconds",
		"How long this replica still trusts its term of the lease, from its last successful acquire or renew; 0 when it holds none.", []string{"lease"}, nil)
	fencedDesc = prometheus.NewDesc("leaderaware_fenced_writes_total",
		"Fenced writes of this replica's terms of the lease: committed, or refused because the term was over.", []string{"lease", "result"}, nil)
	storeOpDesc = prometheus.NewDesc("leaderaware_store_operation_duration_seconds",
		"Duration of the lease store calls this replica's electors made.", []string{"op", "result"}, nil)
	jobDesc = prometheus.NewDesc("leaderaware_job_transition_duration_seconds",
		"Duration of the inner Start (phase start) and Stop (phase stop) of this replica's decorated jobs.", []string{"lease", "phase", "result"}, nil)
)

// Collector turns each [elector.Event] into Prometheus metrics. It implements
// [elector.Observer] and [prometheus.Collector]; see the package
// documentation for the metrics. One Collector serves every elector and
// decorated job of a process; register it once. Its methods are safe for
// concurrent use, and Observe never blocks for longer than another
// Observe or the copy of the state a scrape takes.
type Collector struct {
	mu     sync.Mutex
	leases map[string]*leaseState
	ops    [nEnum][nEnum]histogram // by elector.Op, elector.Result
}

// leaseState is what a Collector knows of one lease.
type leaseState struct {
	leader bool
	// decorated is set once a decorated job reported the lease: from then
	// on leader also gates the trust (a renewal that returned after its term
	// ended must not show as trust).
	decorated  bool
	token      uint64
	elections  uint64
	demotions  [nEnum]uint64 // by elector.Cause
	fenced     [2]uint64     // committed, refused
	trustUntil time.Time     // a reading of clock.Now; zero if none
	jobs       [2][2]histogram
}

// Indexes of leaseState.fenced and leaseState.jobs.
const (
	committed, refused = 0, 1
	phaseStart         = 0
	phaseStop          = 1
	jobOK, jobError    = 0, 1
)

var (
	fencedLabels = [2]string{"committed", "refused"}
	phaseLabels  = [2]string{"start", "stop"}
	jobLabels    = [2]string{"ok", "error"}
)

// New returns a Collector with no metrics yet: a lease's metrics appear with
// the first event that names it.
func New() *Collector {
	return &Collector{leases: make(map[string]*leaseState)}
}

// Observe implements [elector.Observer]. It updates counters under a mutex
// and does not allocate, except the first time it sees a lease.
func (c *Collector) Observe(e elector.Event) {
	var now time.Time
	if e.Trust > 0 {
		now = clock.Now()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.Kind == elector.EventStoreOp {
		c.ops[index(e.Op)][index(e.Result)].observe(&storeBuckets, e.Duration)
	}
	if e.Lease == "" {
		return // nothing to label the lease's metrics with
	}
	l := c.leases[e.Lease]
	if l == nil {
		l = new(leaseState)
		c.leases[e.Lease] = l
	}
	switch e.Kind {
	case elector.EventStoreOp:
		switch {
		case e.Op == elector.OpRenew && e.Result == elector.ResultOK:
			l.trust(now, e.Trust)
		case e.Op == elector.OpRenew && e.Result == elector.ResultLost, e.Op == elector.OpRelease:
			l.trustUntil = time.Time{} // the term is over
		}
	case elector.EventCampaign:
		if e.Result == elector.ResultOK {
			l.elected(e.Token)
			l.trust(now, e.Trust)
		}
	case elector.EventElected:
		l.leader, l.decorated = true, true
		l.elected(e.Token)
		l.trust(now, e.Trust)
	case elector.EventDemoted:
		l.leader, l.decorated = false, true
		l.demotions[index(e.Cause)]++
		l.trustUntil = time.Time{}
	case elector.EventFenced:
		switch e.Result {
		case elector.ResultOK:
			l.fenced[committed]++
		case elector.ResultLost:
			l.fenced[refused]++
		}
	case elector.EventJobStart, elector.EventJobStop:
		phase, result := phaseStart, jobError
		if e.Kind == elector.EventJobStop {
			phase = phaseStop
		}
		if e.Result == elector.ResultOK || e.Result == 0 && e.Err == nil {
			result = jobOK
		}
		l.jobs[phase][result].observe(&jobBuckets, e.Duration)
	}
}

// elected counts a term once, whether the elector (campaign won) or the
// decorated job (elected) reports it, or both: tokens grow with every term.
func (l *leaseState) elected(token uint64) {
	if token == 0 || token != l.token {
		l.elections++
	}
	if token != 0 {
		l.token = token
	}
}

func (l *leaseState) trust(now time.Time, d time.Duration) {
	if d > 0 {
		l.trustUntil = now.Add(d)
	}
}

// Describe implements [prometheus.Collector].
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{leaderDesc, tokenDesc, electionsDesc, demotionsDesc, trustDesc, fencedDesc, storeOpDesc, jobDesc} {
		ch <- d
	}
}

// Collect implements [prometheus.Collector]. It copies the state under the
// mutex and builds the metrics after releasing it.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	type named struct {
		name string
		leaseState
	}
	c.mu.Lock()
	ops := c.ops
	leases := make([]named, 0, len(c.leases))
	for name, l := range c.leases {
		leases = append(leases, named{name, *l})
	}
	c.mu.Unlock()
	now := clock.Now()

	for op := range ops {
		for result := range ops[op] {
			if h := &ops[op][result]; h.count > 0 {
				ch <- h.metric(storeOpDesc, &storeBuckets, label(elector.Op(op)), label(elector.Result(result)))
			}
		}
	}
	for _, l := range leases {
		leader := 0.0
		if l.leader {
			leader = 1
		}
		ch <- prometheus.MustNewConstMetric(leaderDesc, prometheus.GaugeValue, leader, l.name)
		ch <- prometheus.MustNewConstMetric(tokenDesc, prometheus.GaugeValue, float64(l.token), l.name)
		ch <- prometheus.MustNewConstMetric(electionsDesc, prometheus.CounterValue, float64(l.elections), l.name)
		var trust time.Duration
		if !l.trustUntil.IsZero() && (l.leader || !l.decorated) {
			trust = max(l.trustUntil.Sub(now), 0)
		}
		ch <- prometheus.MustNewConstMetric(trustDesc, prometheus.GaugeValue, trust.Seconds(), l.name)
		for cause, n := range l.demotions {
			// Every known cause from the start, so that increase() sees the
			// first one; unknown ones once they happen.
			if index(elector.Cause(cause)) == cause && cause != 0 || n > 0 {
				ch <- prometheus.MustNewConstMetric(demotionsDesc, prometheus.CounterValue, float64(n), l.name, label(elector.Cause(cause)))
			}
		}
		for r, n := range l.fenced {
			ch <- prometheus.MustNewConstMetric(fencedDesc, prometheus.CounterValue, float64(n), l.name, fencedLabels[r])
		}
		for phase := range l.jobs {
			for result := range l.jobs[phase] {
				if h := &l.jobs[phase][result]; h.count > 0 {
					ch <- h.metric(jobDesc, &jobBuckets, l.name, phaseLabels[phase], jobLabels[result])
				}
			}
		}
	}
}

// nEnum bounds the elector enums a Collector tells apart; values past it,
// or without a name, are counted as "unknown".
const nEnum = 8

type enum interface {
	~uint8
	String() string
}

// index returns v's slot: v itself if it is a named value, else 0.
func index[T enum](v T) int {
	if int(v) < nEnum && v != 0 && v.String() != "unknown" {
		return int(v)
	}
	return 0
}

// label names the value in slot i.
func label[T enum](v T) string {
	if v == 0 {
		return "unknown"
	}
	return v.String()
}
