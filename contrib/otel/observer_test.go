package leaderotel_test

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	leaderotel "github.com/leaderaware/leaderaware/contrib/otel"
	"github.com/leaderaware/leaderaware/elector"
)

var (
	cumulative = metricdata.CumulativeTemporality
	causes     = []string{"resigned", "lost", "expired", "start_failed", "store_error", "abandoned", "handed_off"}
)

func leaderMetric(points ...metricdata.DataPoint[int64]) metricdata.Metrics {
	return metricdata.Metrics{Name: "leaderaware.leader", Unit: "{leader}",
		Description: "1 while a decorated job of this replica leads the lease, else 0; summed over the replicas, the number of leaders.",
		Data:        metricdata.Sum[int64]{Temporality: cumulative, IsMonotonic: false, DataPoints: points}}
}

func tokenMetric(points ...metricdata.DataPoint[int64]) metricdata.Metrics {
	return metricdata.Metrics{Name: "leaderaware.term.token", Unit: "{token}",
		Description: "Fencing token of this replica's current or last term of the lease.",
		Data:        metricdata.Gauge[int64]{DataPoints: points}}
}

func electionsMetric(points ...metricdata.DataPoint[int64]) metricdata.Metrics {
	return metricdata.Metrics{Name: "leaderaware.elections", Unit: "{election}",
		Description: "Terms of the lease this replica won.",
		Data:        metricdata.Sum[int64]{Temporality: cumulative, IsMonotonic: true, DataPoints: points}}
}

// demotionsMetric has a point per cause of the lease: n of the cause named,
// 0 of the others.
func demotionsMetric(name string, n map[string]int64) metricdata.Metrics {
	var points []metricdata.DataPoint[int64]
	for _, c := range causes {
		points = append(points, point(n[c], lease(name, attribute.String("leaderaware.demotion.cause", c))))
	}
	return metricdata.Metrics{Name: "leaderaware.demotions", Unit: "{demotion}",
		Description: "Terms of the lease this replica's decorated jobs ended, by cause.",
		Data:        metricdata.Sum[int64]{Temporality: cumulative, IsMonotonic: true, DataPoints: points}}
}

func fencedMetric(name string, committed, refused int64) metricdata.Metrics {
	return metricdata.Metrics{Name: "leaderaware.fenced_writes", Unit: "{write}",
		Description: "Fenced writes of this replica's terms of the lease: committed, or refused because the term was over.",
		Data: metricdata.Sum[int64]{Temporality: cumulative, IsMonotonic: true, DataPoints: []metricdata.DataPoint[int64]{
			point(committed, lease(name, attribute.String("leaderaware.fenced_write.result", "committed"))),
			point(refused, lease(name, attribute.String("leaderaware.fenced_write.result", "refused"))),
		}}}
}

func trustMetric(points ...metricdata.DataPoint[float64]) metricdata.Metrics {
	return metricdata.Metrics{Name: "leaderaware.trust.remaining", Unit: "s",
		Description: "How long this replica still trusts its term of the lease, from its last successful acquire or renew; 0 when it holds none.",
		Data:        metricdata.Gauge[float64]{DataPoints: points}}
}

func storeOpsMetric(points ...metricdata.HistogramDataPoint[float64]) metricdata.Metrics {
	return metricdata.Metrics{Name: "leaderaware.store.operation.duration", Unit: "s",
		Description: "Duration of the lease store calls this replica's electors made.",
		Data:        metricdata.Histogram[float64]{Temporality: cumulative, DataPoints: points}}
}

// storeOp is the attribute set of a store call: error.type only if it failed.
func storeOp(op, errorType string) attribute.Set {
	if errorType == "" {
		return attribute.NewSet(attribute.String("leaderaware.store.operation", op))
	}
	return attribute.NewSet(attribute.String("leaderaware.store.operation", op), attribute.String("error.type", errorType))
}

func jobsMetric(points ...metricdata.HistogramDataPoint[float64]) metricdata.Metrics {
	return metricdata.Metrics{Name: "leaderaware.job.transition.duration", Unit: "s",
		Description: "Duration of the inner Start and Stop of this replica's decorated jobs.",
		Data:        metricdata.Histogram[float64]{Temporality: cumulative, DataPoints: points}}
}

func job(name, phase, result string) attribute.Set {
	return lease(name, attribute.String("leaderaware.job.phase", phase), attribute.String("leaderaware.job.result", result))
}

// A term as a decorated job and its elector report it: campaign won,
// elected, the inner Start, a renewal, fenced writes, the inner Stop.
func TestCollectOfATerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newReplica(t)
		obs := func(e elector.Event) {
			e.Lease, e.Holder = "prices", holder
			r.Observe(e)
		}
		obs(elector.Event{Kind: elector.EventStoreOp, Op: elector.OpAcquire, Result: elector.ResultOK, Token: 7, Duration: 2 * time.Millisecond})
		obs(elector.Event{Kind: elector.EventCampaign, Result: elector.ResultOK, Token: 7, Trust: 2700 * time.Millisecond})
		obs(elector.Event{Kind: elector.EventElected, Token: 7, Trust: 2700 * time.Millisecond})
		obs(elector.Event{Kind: elector.EventJobStart, Token: 7, Result: elector.ResultOK, Duration: 30 * time.Millisecond})
		time.Sleep(time.Second)
		obs(elector.Event{Kind: elector.EventStoreOp, Op: elector.OpRenew, Result: elector.ResultOK, Token: 7, Duration: time.Millisecond, Trust: 2700 * time.Millisecond})
		obs(elector.Event{Kind: elector.EventFenced, Result: elector.ResultOK, Token: 7})
		obs(elector.Event{Kind: elector.EventFenced, Result: elector.ResultOK, Token: 7})
		obs(elector.Event{Kind: elector.EventFenced, Result: elector.ResultLost, Token: 7})
		obs(elector.Event{Kind: elector.EventJobStop, Token: 7, Result: elector.ResultError, Duration: 20 * time.Second, Err: errors.New("stop timed out")})
		time.Sleep(time.Second) // the trust left is 2.7s − 1s

		got := r.collect(t)
		assert.Len(t, got, 8)
		expect(t, got,
			leaderMetric(point[int64](1, lease("prices"))),
			tokenMetric(point[int64](7, lease("prices"))),
			electionsMetric(point[int64](1, lease("prices"))),
			demotionsMetric("prices", nil),
			trustMetric(point(1.7, lease("prices"))),
			fencedMetric("prices", 2, 1),
			storeOpsMetric(
				histPoint(storeBounds, storeOp("acquire", ""), 2*time.Millisecond),
				histPoint(storeBounds, storeOp("renew", ""), time.Millisecond)),
			jobsMetric(
				histPoint(jobBounds, job("prices", "start", "ok"), 30*time.Millisecond),
				histPoint(jobBounds, job("prices", "stop", "error"), 20*time.Second)),
		)

		obs(elector.Event{Kind: elector.EventDemoted, Token: 7, Cause: elector.CauseLost, Err: elector.ErrLeaseLost})
		expect(t, r.collect(t),
			leaderMetric(point[int64](0, lease("prices"))),
			tokenMetric(point[int64](7, lease("prices"))),
			demotionsMetric("prices", map[string]int64{"lost": 1}),
			trustMetric(point(0.0, lease("prices"))),
		)
	})
}

// The sum of leaderaware.leader over replicas counts the leaders: two
// replicas that both think they lead sum to 2. Repeated events do not move
// a replica's own value past 0 or 1.
func TestLeaderSumCountsLeaders(t *testing.T) {
	r := newReplica(t)
	other, err := leaderotel.New(r.mp)
	require.NoError(t, err)
	elected := elector.Event{Kind: elector.EventElected, Lease: "job"}
	demoted := elector.Event{Kind: elector.EventDemoted, Lease: "job", Cause: elector.CauseExpired}

	r.Observe(elected)
	r.Observe(elected)
	expect(t, r.collect(t), leaderMetric(point[int64](1, lease("job"))))
	other.Observe(elected) // a second replica, recording to the same provider
	expect(t, r.collect(t), leaderMetric(point[int64](2, lease("job"))))
	r.Observe(demoted)
	r.Observe(demoted)
	expect(t, r.collect(t), leaderMetric(point[int64](1, lease("job"))))
	other.Observe(demoted)
	expect(t, r.collect(t), leaderMetric(point[int64](0, lease("job"))))
}

func TestStoreOperationErrorType(t *testing.T) {
	r := newReplica(t)
	for _, res := range []elector.Result{elector.ResultOK, elector.ResultHeld, elector.ResultLost, elector.ResultError, 0} {
		r.Observe(elector.Event{Kind: elector.EventStoreOp, Lease: "job", Op: elector.OpAcquire, Result: res, Duration: time.Second})
	}
	r.Observe(elector.Event{Kind: elector.EventStoreOp, Op: elector.Op(200), Result: elector.ResultOK, Duration: time.Second}) // no lease
	expect(t, r.collect(t), storeOpsMetric(
		histPoint(storeBounds, storeOp("acquire", ""), time.Second),
		histPoint(storeBounds, storeOp("acquire", "held"), time.Second),
		histPoint(storeBounds, storeOp("acquire", "lost"), time.Second),
		histPoint(storeBounds, storeOp("acquire", "error"), time.Second),
		histPoint(storeBounds, storeOp("acquire", "unknown"), time.Second),
		histPoint(storeBounds, storeOp("unknown", ""), time.Second),
	))
}

func TestTrustEndsWithTheTerm(t *testing.T) {
	ok := func(lease string) elector.Event {
		return elector.Event{Kind: elector.EventCampaign, Lease: lease, Result: elector.ResultOK, Token: 1, Trust: time.Hour}
	}
	synctest.Test(t, func(t *testing.T) {
		r := newReplica(t)
		for _, e := range []elector.Event{ok("released"), ok("lost"), ok("renewfailed"), ok("demoted"), ok("late"), ok("kept"), ok("runout")} {
			r.Observe(e)
		}
		r.Observe(elector.Event{Kind: elector.EventStoreOp, Lease: "released", Op: elector.OpRelease, Result: elector.ResultOK})
		r.Observe(elector.Event{Kind: elector.EventStoreOp, Lease: "lost", Op: elector.OpRenew, Result: elector.ResultLost})
		r.Observe(elector.Event{Kind: elector.EventStoreOp, Lease: "renewfailed", Op: elector.OpRenew, Result: elector.ResultError, Err: errors.New("timeout")})
		r.Observe(elector.Event{Kind: elector.EventDemoted, Lease: "demoted", Cause: elector.CauseExpired})
		// A renewal that returned after the decorated job's term ended.
		r.Observe(elector.Event{Kind: elector.EventElected, Lease: "late", Token: 1})
		r.Observe(elector.Event{Kind: elector.EventDemoted, Lease: "late", Cause: elector.CauseExpired})
		time.Sleep(30 * time.Minute)
		r.Observe(elector.Event{Kind: elector.EventStoreOp, Lease: "late", Op: elector.OpRenew, Result: elector.ResultOK, Trust: time.Hour})
		r.Observe(elector.Event{Kind: elector.EventStoreOp, Lease: "kept", Op: elector.OpRenew, Result: elector.ResultOK, Trust: time.Hour})
		time.Sleep(45 * time.Minute) // "runout" had no renewal: never below 0
		expect(t, r.collect(t), trustMetric(
			point(0.0, lease("released")),
			point(0.0, lease("lost")),
			point(0.0, lease("renewfailed")),
			point(0.0, lease("demoted")),
			point(0.0, lease("late")),
			point(900.0, lease("kept")),
			point(0.0, lease("runout")),
		))
	})
}

// A term is counted once whether the elector, the decorated job or both
// report it.
func TestElectionsCountTermsOnce(t *testing.T) {
	r := newReplica(t)
	for _, e := range []elector.Event{
		{Kind: elector.EventCampaign, Lease: "both", Result: elector.ResultOK, Token: 3},
		{Kind: elector.EventElected, Lease: "both", Token: 3},
		{Kind: elector.EventDemoted, Lease: "both", Token: 3, Cause: elector.CauseStartFailed},
		{Kind: elector.EventCampaign, Lease: "both", Result: elector.ResultOK, Token: 4},
		{Kind: elector.EventElected, Lease: "both", Token: 4},
		{Kind: elector.EventCampaign, Lease: "elector", Result: elector.ResultOK, Token: 1},
		{Kind: elector.EventCampaign, Lease: "elector", Result: elector.ResultHeld},
		{Kind: elector.EventCampaign, Lease: "elector", Result: elector.ResultError, Err: errors.New("down")},
		{Kind: elector.EventElected, Lease: "job"},
		{Kind: elector.EventElected, Lease: "job"}, // an elector that reports no tokens
	} {
		r.Observe(e)
	}
	expect(t, r.collect(t),
		electionsMetric(point[int64](2, lease("both")), point[int64](1, lease("elector")), point[int64](2, lease("job"))),
		tokenMetric(point[int64](4, lease("both")), point[int64](1, lease("elector"))),
	)
}

// Every kind of event, with the holder set: no attribute is the holder.
func TestNoHolderAttribute(t *testing.T) {
	r := newReplica(t)
	for kind := elector.EventStoreOp; kind <= elector.EventJobStop; kind++ {
		for res := elector.ResultOK; res <= elector.ResultError; res++ {
			r.Observe(elector.Event{Kind: kind, Lease: "job", Holder: holder, Token: 1, Op: elector.OpRenew,
				Result: res, Cause: elector.CauseExpired, Duration: time.Millisecond, Trust: time.Second, Err: errors.New(holder)})
		}
	}
	got := r.collect(t)
	require.Len(t, got, 8)
	for name, m := range got {
		var sets []attribute.Set
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			for _, p := range d.DataPoints {
				sets = append(sets, p.Attributes)
			}
		case metricdata.Gauge[int64]:
			for _, p := range d.DataPoints {
				sets = append(sets, p.Attributes)
			}
		case metricdata.Gauge[float64]:
			for _, p := range d.DataPoints {
				sets = append(sets, p.Attributes)
			}
		case metricdata.Histogram[float64]:
			for _, p := range d.DataPoints {
				sets = append(sets, p.Attributes)
			}
		default:
			t.Fatalf("%s: unexpected data %T", name, d)
		}
		require.NotEmpty(t, sets, name)
		for _, s := range sets {
			for _, kv := range s.ToSlice() {
				assert.NotContains(t, string(kv.Key), "holder", name)
				assert.NotContains(t, kv.Value.String(), holder, name)
			}
		}
	}
}

func TestNewRefusesNilProvider(t *testing.T) {
	_, err := leaderotel.New(nil)
	require.ErrorContains(t, err, "MeterProvider is nil")
}

// Events from many goroutines while collections run (run with -race).
func TestConcurrentObserveAndCollect(t *testing.T) {
	r := newReplica(t)
	const writers, each = 4, 1000
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				r.Observe(elector.Event{Kind: elector.EventFenced, Lease: "job", Result: elector.ResultOK})
				r.Observe(elector.Event{Kind: elector.EventStoreOp, Lease: "job", Op: elector.OpRenew, Result: elector.ResultOK, Trust: time.Second})
			}
		})
	}
	for range 20 {
		r.collect(t)
	}
	wg.Wait()
	expect(t, r.collect(t), fencedMetric("job", writers*each, 0))
}

func TestObserveDoesNotAllocate(t *testing.T) {
	r := newReplica(t)
	events := benchEvents()
	for _, e := range events {
		r.Observe(e) // the first event of a lease adds it
	}
	for _, e := range events {
		assert.Zero(t, testing.AllocsPerRun(100, func() { r.Observe(e) }), e.Kind.String())
	}
}
