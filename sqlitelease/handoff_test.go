package sqlitelease_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/counting"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// countingStore counts TryAcquire calls and keeps the Store's watch
// visible to the elector.
type countingStore = counting.Store[*sqlitelease.Store]

// TestHandoffAcrossStores hands a lease back and forth between two electors
// on two Stores of one file, as two processes would. Each waiting candidate
// must take over well within its 5 s RetryInterval: the lease watcher
// wakes it.
func TestHandoffAcrossStores(t *testing.T) {
	const (
		handoffs = 6
		bound    = 500 * time.Millisecond // generous; typical is one 20 ms poll
	)
	path := filepath.Join(t.TempDir(), "leases.db")
	stores := [2]*countingStore{{S: openPath(t, path)}, {S: openPath(t, path)}}
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
		before := stores[next].Acquires.Load()
		won := make(chan result, 1)
		go func() {
			t, err := electors[next].Campaign(ctx)
			won <- result{t, err}
		}()
		require.Eventually(t, func() bool { return stores[next].Acquires.Load() > before },
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
		require.LessOrEqual(t, stores[next].Acquires.Load()-before, int64(3), "woken for the release, not by churn")
		cur = next
	}
	require.NoError(t, term.Resign(ctx))
	slices.Sort(took)
	t.Logf("handoff times (sorted): %v; median %v", took, took[len(took)/2])
}

// renewals counts the successful renewals an elector reports.
type renewals struct{ n atomic.Int64 }

func (r *renewals) Observe(ev elector.Event) {
	if ev.Kind == elector.EventStoreOp && ev.Op == elector.OpRenew && ev.Result == elector.ResultOK {
		r.n.Add(1)
	}
}

// TestWaitingCandidatesMakeNoCalls: 100 candidates that wait on one Store
// for 100 leases that another Store holds and renews make no store call of
// their own while they wait, although their RetryInterval (20 ms) would
// have them read the lease 50 times a second: the Store's one lease
// watcher delivers every renewal. Released leases are still taken within
// moments, far below the TTL of a minute, and on Linux so are the leases
// of a holder whose process died. Each candidate makes exactly two
// TryAcquire calls: the first, and the one that wins. The TTL is long so
// that no watch completes even on a starved machine.
func TestWaitingCandidatesMakeNoCalls(t *testing.T) {
	const (
		n     = 100
		ttl   = time.Minute
		bound = 5 * time.Second // for the last of 50 takeovers; typical is tens of ms
	)
	path := filepath.Join(t.TempDir(), "leases.db")
	a := openPath(t, path)
	b := &countingStore{S: openPath(t, path)}
	ctx, cancel := context.WithCancel(bg(t))
	defer cancel()

	var renewed renewals
	holders := make([]elector.Term, n)
	for i := range holders {
		e, err := elector.New(a, fmt.Sprintf("job-%d", i), elector.Config{TTL: ttl, RenewInterval: 500 * time.Millisecond, Holder: "a", Observer: &renewed})
		require.NoError(t, err)
		holders[i], err = e.Campaign(ctx)
		require.NoError(t, err)
		defer holders[i].Abandon()
	}

	type result struct {
		i int
		campaignResult
	}
	won := make(chan result, n)
	for i := range n {
		e, err := elector.New(b, fmt.Sprintf("job-%d", i), elector.Config{TTL: ttl, RetryInterval: 20 * time.Millisecond, Holder: "b"})
		require.NoError(t, err)
		go func() {
			term, err := e.Campaign(ctx)
			won <- result{i, campaignResult{term, err, time.Now()}}
		}()
	}
	require.Eventually(t, func() bool { return b.Acquires.Load() >= n }, 5*time.Second, time.Millisecond,
		"each candidate tries once and is refused")
	// Wait, by the holders' own count, until every lease was renewed about
	// twice: polling candidates would have read their lease some 50 times
	// each by then.
	from, reads, start := renewed.n.Load(), b.Reads.Load(), time.Now()
	require.Eventually(t, func() bool { return renewed.n.Load() >= from+2*n }, 30*time.Second, 10*time.Millisecond)
	require.Equal(t, int64(n), b.Acquires.Load(), "waiting candidates made store calls")
	polls := int64(time.Since(start)/(20*time.Millisecond)) + 1
	reads = b.Reads.Load() - reads
	t.Logf("%d GetMany calls for %d waiting candidates in %d polls", reads, n, polls)
	assert.LessOrEqual(t, reads, 2*polls, "one GetMany per poll for all the candidates, not one per lease")

	var terms []elector.Term
	defer func() {
		for _, term := range terms {
			require.NoError(t, term.Resign(bg(t)))
		}
	}()
	// collect waits for the candidates of leases [lo, hi) to win, and
	// returns the longest time a candidate took to lead from since(i), the
	// moment its lease became free.
	collect := func(lo, hi int, since func(i int) time.Time) time.Duration {
		t.Helper()
		var last time.Duration
		deadline := time.After(30 * time.Second)
		for range hi - lo {
			select {
			case r := <-won:
				require.NoError(t, r.err)
				require.True(t, r.i >= lo && r.i < hi, "job-%d was taken while its holder lives", r.i)
				last = max(last, r.at.Sub(since(r.i)))
				terms = append(terms, r.term)
			case <-deadline:
				t.Fatalf("the candidates of job-%d..%d did not all lead within 30s", lo, hi-1)
			}
		}
		return last
	}
	var released [n / 2]time.Time
	for i, term := range holders[:n/2] {
		released[i] = time.Now()
		require.NoError(t, term.Resign(ctx))
	}
	took := collect(0, n/2, func(i int) time.Time { return released[i] })
	t.Logf("%d released leases taken over, each within %v of its release", n/2, took)
	assert.Less(t, took, bound)

	if runtime.GOOS == "linux" {
		died := time.Now()
		require.NoError(t, sqlitelease.Die(a))
		took = collect(n/2, n, func(int) time.Time { return died })
		t.Logf("%d leases of a dead holder taken over, the last %v after its death", n/2, took)
		assert.Less(t, took, bound)
		assert.Equal(t, int64(2*n), b.Acquires.Load(), "one TryAcquire to start, one to win")
	}
}

// campaignResult is what a campaign returned, and when.
type campaignResult struct {
	term elector.Term
	err  error
	at   time.Time
}
