package decorator_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

// runCycles starts and stops d n times, checking after each election and
// each Stop that hooks fired once per transition, that Depth, store calls
// and goroutines do not grow.
func runCycles(t *testing.T, n int, d decorator.Job, job *fakeJob, h *hookLog, store *countingStore) {
	t.Helper()
	ctx := context.Background()
	depth := decorator.Depth(d)
	var first counts
	for cycle := int32(1); cycle <= int32(n); cycle++ {
		before := store.counts()
		synctest.Wait()
		require.Zero(t, ourGoroutines(), "before cycle %d", cycle)

		require.NoError(t, d.Start(ctx))
		synctest.Wait()
		require.Equal(t, cycle, job.starts.Load(), "inner starts in cycle %d", cycle)
		require.Equal(t, cycle, h.elected.Load(), "OnElected in cycle %d", cycle)
		require.Equal(t, cycle-1, h.demoted.Load(), "OnDemoted in cycle %d", cycle)
		require.Equal(t, 1, ourGoroutines(), "goroutines as the job starts in cycle %d: the gate (the Store's renewal schedule runs on a timer)", cycle)
		time.Sleep(500 * time.Millisecond)
		require.Equal(t, 2, ourGoroutines(), "goroutines while leading in cycle %d: the gate, and the Store's resume watch", cycle)

		time.Sleep(2000 * time.Millisecond) // two renewals in all
		require.NoError(t, d.Stop(ctx))
		require.Equal(t, cycle, job.stops.Load(), "inner stops in cycle %d", cycle)
		require.Equal(t, cycle, h.elected.Load(), "OnElected after Stop in cycle %d", cycle)
		require.Equal(t, cycle, h.demoted.Load(), "OnDemoted after Stop in cycle %d", cycle)
		synctest.Wait()
		require.Zero(t, ourGoroutines(), "goroutines after Stop in cycle %d", cycle)

		require.Equal(t, depth, decorator.Depth(d), "Depth in cycle %d", cycle)
		delta := store.counts().sub(before)
		if cycle == 1 {
			first = delta
			require.Equal(t, counts{Acquire: 1, Renew: 2, Release: 1}, first)
		} else {
			require.Equal(t, first, delta, "store calls in cycle %d", cycle)
		}
	}
	require.Zero(t, h.errors.Load())
}

func newCycleJob(lastToken *atomic.Uint64) *fakeJob {
	return &fakeJob{startFn: func(ctx context.Context) error {
		if term, ok := elector.TermFromContext(ctx); ok {
			lastToken.Store(term.Token())
		}
		return nil
	}}
}

func TestCyclesDoNotGrow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newCountingStore()
		e := newElector(t, store, "a")
		var lastToken atomic.Uint64
		job := newCycleJob(&lastToken)
		h, h2 := &hookLog{}, &hookLog{}
		d := decorator.Decorate[decorator.Job](job, e,
			decorator.WithMiddleware(decorator.Recover(), decorator.Log(discard)),
			decorator.WithHooks(h.hooks()),
			decorator.WithHooks(decorator.Hooks{OnElected: h2.hooks().OnElected}), // composes, not replaces
			decorator.WithLogger(discard))
		require.Equal(t, 3, decorator.Depth(d))
		runCycles(t, 5, d, job, h, store)
		require.EqualValues(t, 5, h2.elected.Load())
		require.EqualValues(t, 5, lastToken.Load())
	})
}

func TestElectorUnchangedAfterCycles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		e := newElector(t, store, "a")
		var lastToken atomic.Uint64
		job := newCycleJob(&lastToken)
		h := &hookLog{}
		d := decorator.Decorate[decorator.Job](job, e, decorator.WithHooks(h.hooks()), decorator.WithLogger(discard))
		runCycles(t, 5, d, job, h, store)

		// campaignOnce campaigns, leads 2.5s, resigns; it returns the calls.
		campaignOnce := func(e elector.Elector) (counts, uint64) {
			before := store.counts()
			term, err := e.Campaign(ctx)
			require.NoError(t, err)
			time.Sleep(2500 * time.Millisecond)
			require.NoError(t, term.Resign(ctx))
			synctest.Wait()
			return store.counts().sub(before), term.Token()
		}
		reused, reusedToken := campaignOnce(e)
		fresh, freshToken := campaignOnce(newElector(t, store, "b"))
		require.Equal(t, fresh, reused)
		require.Equal(t, counts{Acquire: 1, Renew: 2, Release: 1}, reused)
		require.Greater(t, reusedToken, lastToken.Load())
		require.Greater(t, freshToken, reusedToken)
	})
}
