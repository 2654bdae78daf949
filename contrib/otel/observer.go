package leaderotel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/clock"
)

// ScopeName is the instrumentation scope of the instruments.
const ScopeName = "github.com/leaderaware/leaderaware/contrib/otel"

const (
	leaseKey     = attribute.Key("leaderaware.lease")
	causeKey     = attribute.Key("leaderaware.demotion.cause")
	fencedKey    = attribute.Key("leaderaware.fenced_write.result")
	operationKey = attribute.Key("leaderaware.store.operation")
	errorTypeKey = attribute.Key("error.type") // OpenTelemetry semantic conventions
	phaseKey     = attribute.Key("leaderaware.job.phase")
	jobResultKey = attribute.Key("leaderaware.job.result")
)

// Histogram bucket boundaries, in seconds. Store calls: 100µs to 10s (a call
// is bounded by the trust window). Job transitions: 1ms to 60s (a Start or
// Stop is bounded by its timeout, 15s by default, and may overrun it).
var (
	storeBounds = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	jobBounds   = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60}
)

// Observer records each [elector.Event] on OpenTelemetry instruments; see the
// package documentation for them. One Observer serves every elector and
// decorated job of a process. It is safe for concurrent use; Observe holds
// a mutex briefly and records after releasing it.
type Observer struct {
	leader    metric.Int64UpDownCounter
	token     metric.Int64Gauge
	elections metric.Int64Counter
	demotions metric.Int64Counter
	fenced    metric.Int64Counter
	storeOps  metric.Float64Histogram
	jobs      metric.Float64Histogram

	storeAttrs [nEnum][nEnum]attrs // by elector.Op, elector.Result

	mu     sync.Mutex
	leases map[string]*leaseState
}

// leaseState is what an Observer knows of one lease.
type leaseState struct {
	attrs *leaseAttrs
	// leader is whether a decorated job leads; decorated is set once one
	// reported the lease: from then on leader also gates the trust (a
	// renewal that returned after its term ended must not show as trust).
	leader, decorated bool
	token             uint64
	trustUntil        time.Time // a reading of clock.Now; zero if none
}

// New returns an Observer whose instruments come from a meter of mp, or an
// error if mp refuses one. A lease's instruments report from the first event
// that names it.
func New(mp metric.MeterProvider) (*Observer, error) {
	if mp == nil {
		return nil, errors.New("leaderotel: New: the MeterProvider is nil; pass otel.GetMeterProvider() to use the global one")
	}
	m := mp.Meter(ScopeName)
	o := &Observer{leases: make(map[string]*leaseState)}
	var errs [8]error
	o.leader, errs[0] = m.Int64UpDownCounter("leaderaware.leader", metric.WithUnit("{leader}"),
		metric.WithDescription("1 while a decorated job of this replica leads the lease, else 0; summed over the replicas, the number of leaders."))
	o.token, errs[1] = m.Int64Gauge("leaderaware.term.token", metric.WithUnit("{token}"),
		metric.WithDescription("Fencing token of this replica's current or last term of the lease."))
	o.elections, errs[2] = m.Int64Counter("leaderaware.elections", metric.WithUnit("{election}"),
		metric.WithDescription("Terms of the lease this replica won."))
	o.demotions, errs[3] = m.Int64Counter("leaderaware.demotions", metric.WithUnit("{demotion}"),
		metric.WithDescription("Terms of the lease this replica's decorated jobs ended, by cause."))
	o.fenced, errs[4] = m.Int64Counter("leaderaware.fenced_writes", metric.WithUnit("{write}"),
		metric.WithDescription("Fenced writes of this replica's terms of the lease: committed, or refused because the term was over."))
	o.storeOps, errs[5] = m.Float64Histogram("leaderaware.store.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of the lease store calls this replica's electors made."),
		metric.WithExplicitBucketBoundaries(storeBounds...))
	o.jobs, errs[6] = m.Float64Histogram("leaderaware.job.transition.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of the inner Start and Stop of this replica's decorated jobs."),
		metric.WithExplicitBucketBoundaries(jobBounds...))
	_, errs[7] = m.Float64ObservableGauge("leaderaware.trust.remaining", metric.WithUnit("s"),
		metric.WithDescription("How long this replica still trusts its term of the lease, from its last successful acquire or renew; 0 when it holds none."),
		metric.WithFloat64Callback(o.observeTrust))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("leaderotel: New: %w", err)
	}
	for op := range o.storeAttrs {
		for result := range o.storeAttrs[op] {
			kv := []attribute.KeyValue{operationKey.String(label(elector.Op(op)))}
			if elector.Result(result) != elector.ResultOK {
				kv = append(kv, errorTypeKey.String(label(elector.Result(result))))
			}
			o.storeAttrs[op][result] = newAttrs(kv...)
		}
	}
	return o, nil
}

// Observe implements [elector.Observer]. It does not allocate, except the
// first time it sees a lease, when it also reports that lease's counters
// at zero.
func (o *Observer) Observe(e elector.Event) {
	ctx := context.Background()
	if e.Kind == elector.EventStoreOp {
		o.storeOps.Record(ctx, e.Duration.Seconds(), o.storeAttrs[index(e.Op)][index(e.Result)].rec...)
	}
	if e.Lease == "" {
		return // nothing to attribute the lease's instruments to
	}
	var now time.Time
	if e.Trust > 0 {
		now = clock.Now()
	}
	o.mu.Lock()
	l := o.leases[e.Lease]
	fresh := l == nil
	if fresh {
		l = &leaseState{attrs: newLeaseAttrs(e.Lease)}
		o.leases[e.Lease] = l
	}
	a := l.attrs
	var leaderDelta int64
	newTerm := false
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
			newTerm = l.elected(e.Token)
			l.trust(now, e.Trust)
		}
	case elector.EventElected:
		if !l.leader {
			leaderDelta = 1
		}
		l.leader, l.decorated = true, true
		newTerm = l.elected(e.Token)
		l.trust(now, e.Trust)
	case elector.EventDemoted:
		if l.leader {
			leaderDelta = -1
		}
		l.leader, l.decorated = false, true
		l.trustUntil = time.Time{}
	}
	o.mu.Unlock()

	if fresh {
		o.zero(ctx, a)
	}
	if leaderDelta != 0 {
		o.leader.Add(ctx, leaderDelta, a.lease.add...)
	}
	if newTerm {
		o.elections.Add(ctx, 1, a.lease.add...)
		if e.Token != 0 {
			o.token.Record(ctx, int64(e.Token), a.lease.rec...)
		}
	}
	switch e.Kind {
	case elector.EventDemoted:
		o.demotions.Add(ctx, 1, a.demotions[index(e.Cause)].add...)
	case elector.EventFenced:
		switch e.Result {
		case elector.ResultOK:
			o.fenced.Add(ctx, 1, a.fenced[committed].add...)
		case elector.ResultLost:
			o.fenced.Add(ctx, 1, a.fenced[refused].add...)
		}
	case elector.EventJobStart, elector.EventJobStop:
		phase, result := phaseStart, jobError
		if e.Kind == elector.EventJobStop {
			phase = phaseStop
		}
		if e.Result == elector.ResultOK || e.Result == 0 && e.Err == nil {
			result = jobOK
		}
		o.jobs.Record(ctx, e.Duration.Seconds(), a.jobs[phase][result].rec...)
	}
}

// zero reports a new lease's leader and counters at zero, so that a backend
// sees the first increase of each.
func (o *Observer) zero(ctx context.Context, a *leaseAttrs) {
	o.leader.Add(ctx, 0, a.lease.add...)
	o.elections.Add(ctx, 0, a.lease.add...)
	for cause := range a.demotions {
		if cause != 0 && index(elector.Cause(cause)) == cause {
			o.demotions.Add(ctx, 0, a.demotions[cause].add...)
		}
	}
	for _, f := range a.fenced {
		o.fenced.Add(ctx, 0, f.add...)
	}
}

// elected reports whether token starts a term not counted yet: the elector
// (campaign won) and the decorated job (elected) may both report one, and
// tokens grow with every term.
func (l *leaseState) elected(token uint64) bool {
	n := token == 0 || token != l.token
	if token != 0 {
		l.token = token
	}
	return n
}

func (l *leaseState) trust(now time.Time, d time.Duration) {
	if d > 0 {
		l.trustUntil = now.Add(d)
	}
}

// observeTrust reports the trust left of every lease.
func (o *Observer) observeTrust(_ context.Context, obs metric.Float64Observer) error {
	now := clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, l := range o.leases {
		var trust time.Duration
		if !l.trustUntil.IsZero() && (l.leader || !l.decorated) {
			trust = max(l.trustUntil.Sub(now), 0)
		}
		obs.Observe(trust.Seconds(), l.attrs.lease.obs...)
	}
	return nil
}
