package sqlitelease_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// countingStore counts TryAcquire calls. It embeds the concrete store, so
// WatchRelease stays visible to the elector.
type countingStore struct {
	*sqlitelease.Store
	tries atomic.Int64
}

func (c *countingStore) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	c.tries.Add(1)
	return c.Store.TryAcquire(ctx, name, holder, ttl, observed)
}

// TestHandoffAcrossStores hands a lease back and forth between two electors
// on two Stores of one file, as two processes would. Each waiting candidate
// must take over well within its 5 s RetryInterval: the release watcher
// wakes it.
func TestHandoffAcrossStores(t *testing.T) {
	const (
		handoffs = 6
		bound    = 500 * time.Millisecond // generous; typical is one 20 ms poll
	)
	path := filepath.Join(t.TempDir(), "leases.db")
	stores := [2]*countingStore{{Store: openPath(t, path)}, {Store: openPath(t, path)}}
	var electors [2]*elector.LeaseElector
	for i, h := range []string{"replica-0", "replica-1"} {
		e, err := elector.New(stores[i], "handoff", elector.Config{TTL: 10 * time.Second, RetryInterval: 5 * time.Second, Holder: h})
		require.NoError(t, err)
		electors[i] = e
	}
	ctx := bg(t)
	term, err := electors[0].Campaign(ctx)
	require.NoError(t, err)

	type result struct {
		term elector.Term
		err  error
	}
	var took []time.Duration
	cur := 0
	for range handoffs {
		next := 1 - cur
		before := stores[next].tries.Load()
		won := make(chan result, 1)
		go func() {
			t, err := electors[next].Campaign(ctx)
			won <- result{t, err}
		}()
		require.Eventually(t, func() bool { return stores[next].tries.Load() > before },
			time.Second, time.Millisecond, "the candidate tries once and is refused")
		time.Sleep(30 * time.Millisecond) // now it waits

		start := time.Now()
		require.NoError(t, term.Resign(ctx))
		select {
		case r := <-won:
			require.NoError(t, r.err)
			took = append(took, time.Since(start))
			term = r.term
		case <-time.After(3 * time.Second):
			t.Fatalf("replica-%d did not take over within 3s of the resignation", next)
		}
		require.Less(t, took[len(took)-1], bound, "handoff %d", len(took))
		require.LessOrEqual(t, stores[next].tries.Load()-before, int64(3), "woken for the release, not by churn")
		cur = next
	}
	require.NoError(t, term.Resign(ctx))
	slices.Sort(took)
	t.Logf("handoff times (sorted): %v; median %v", took, took[len(took)/2])
}
