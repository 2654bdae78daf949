package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

// This file ports the design leaderaware replaces, kept only as the baseline
// of BenchmarkOldDesignCycle. That version wrapped the job by patching
// methods onto a shared election object on every start() and never undid
// it: each start/stop cycle stacked another layer, duplicated callbacks and
// leaked closures. The port does the same, in Go: oldElection is the shared
// object with function fields; oldLeaderJob.Start wraps its acquire and
// release funcs in a new closure layer around the previous ones and appends
// an onElected callback, and Stop restores nothing. Under the layers sits
// the same elector.MemoryStore that BenchmarkCycle uses.
//
// The port is synchronous (no campaign goroutine, no renewal loop), so one
// cycle at after=10 costs less than one of BenchmarkCycle, which starts and
// stops two goroutines. What the comparison shows is the growth: the old
// design's cost, depth and callbacks grow with every cycle; ours do not.

// oldElection is the shared election object. Every job started on it
// patches its function fields.
type oldElection struct {
	acquire   func(ctx context.Context) (elector.Lease, error)
	release   func(ctx context.Context, l elector.Lease) error
	onElected []func(l elector.Lease)

	depth int // wrapper layers the last acquire went through
	fired int // callbacks fired at the last election
}

// newOldElection returns an election whose innermost acquire and release
// call the store directly.
func newOldElection(s *elector.MemoryStore, name, holder string, ttl time.Duration) *oldElection {
	return &oldElection{
		acquire: func(ctx context.Context) (elector.Lease, error) {
			return s.TryAcquire(ctx, name, holder, ttl, elector.Lease{})
		},
		release: func(ctx context.Context, l elector.Lease) error { return s.Release(ctx, l) },
	}
}

// elect acquires through every layer, then fires every callback.
func (e *oldElection) elect(ctx context.Context) (elector.Lease, error) {
	e.depth, e.fired = 0, 0
	l, err := e.acquire(ctx)
	if err != nil {
		return l, err
	}
	for _, cb := range e.onElected {
		cb(l)
	}
	return l, nil
}

// oldLeaderJob is a job wrapped the old way.
type oldLeaderJob struct {
	inner    decorator.Job
	election *oldElection
	lease    elector.Lease
	running  bool
}

// oldStart is the state of one Start that its closures capture; the
// election keeps every one of them alive for good.
type oldStart struct {
	job *oldLeaderJob
	ctx context.Context
	at  time.Time
}

// Start patches the shared election (one more layer around acquire and
// release, one more callback), runs an election and starts the inner job.
func (j *oldLeaderJob) Start(ctx context.Context) error {
	e := j.election
	st := &oldStart{job: j, ctx: ctx, at: time.Now()}
	prevAcquire, prevRelease := e.acquire, e.release
	e.acquire = func(ctx context.Context) (elector.Lease, error) {
		e.depth++
		l, err := prevAcquire(ctx)
		if err == nil {
			st.job.lease = l
		}
		return l, err
	}
	e.release = func(ctx context.Context, l elector.Lease) error {
		st.job.running = false
		return prevRelease(ctx, l)
	}
	e.onElected = append(e.onElected, func(elector.Lease) {
		e.fired++
		st.job.running = true
	})
	if _, err := e.elect(ctx); err != nil {
		return err
	}
	return j.inner.Start(ctx)
}

// Stop stops the inner job and releases through every layer. It undoes
// nothing Start did.
func (j *oldLeaderJob) Stop(ctx context.Context) error {
	return errors.Join(j.inner.Stop(ctx), j.election.release(ctx, j.lease))
}

// BenchmarkOldDesignCycle measures one Start/Stop cycle of the old design
// after N cycles, the baseline of BenchmarkCycle. after=N first runs N
// cycles untimed. Each timed cycle then stacks one more layer, as the old
// design does; to measure the cost at cycle N+1 rather than at a depth that
// drifts with b.N, the loop puts the election's three fields back to their
// state after the N setup cycles (three assignments, a few ns, timed) before
// the next cycle.
//
// Metrics: depth is the number of wrapper layers the last acquire went
// through (N+1); callbacks is the number of onElected callbacks the last
// election fired (N+1). BenchmarkCycle's job keeps Depth 2 and fires each
// hook once per election, whatever the cycle. leaked-B is how much the live
// heap grew over the N setup cycles (after a GC): the closures and per-Start
// state the election keeps reachable.
func BenchmarkOldDesignCycle(b *testing.B) {
	ctx := context.Background()
	for _, after := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("after=%d", after), func(b *testing.B) {
			e := newOldElection(elector.NewMemoryStore(), "bench", "bench", elector.DefaultTTL)
			job := &oldLeaderJob{inner: nopJob{}, election: e}
			cycle := func() {
				if err := job.Start(ctx); err != nil {
					b.Fatal(err)
				}
				if err := job.Stop(ctx); err != nil {
					b.Fatal(err)
				}
			}
			heap := func() uint64 {
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				return ms.HeapAlloc
			}
			before := heap()
			for range after {
				cycle()
			}
			leaked := float64(heap()) - float64(before)
			acquire, release, callbacks := e.acquire, e.release, len(e.onElected)
			b.ReportAllocs()
			for b.Loop() {
				cycle()
				e.acquire, e.release, e.onElected = acquire, release, e.onElected[:callbacks]
			}
			if e.depth != after+1 || e.fired != after+1 {
				b.Fatalf("depth %d, callbacks %d; want %d", e.depth, e.fired, after+1)
			}
			b.ReportMetric(float64(e.depth), "depth")
			b.ReportMetric(float64(e.fired), "callbacks")
			b.ReportMetric(leaked, "leaked-B")
		})
	}
}
