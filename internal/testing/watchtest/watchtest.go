// Package watchtest holds what the stores' tests of the elector's watch
// ([elector.BulkReader], [elector.Notifier]) share: a wait for a watched
// state, and one test of what the watch is for (waiting candidates make no
// store calls of their own, releases reach them fast, and dead holders are
// replaced after the elapsed-time rule, never before).
package watchtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/counting"
)

// Leases is how many leases, holders and candidates CandidatesMakeNoCalls
// runs.
const Leases = 100

// Case is the store under test and the bounds its watcher promises.
type Case[S counting.Watching] struct {
	Candidates *counting.Store[S] // the store every candidate campaigns on
	Holders    []elector.Store    // the holders' stores, other than Candidates.S; lease i is held on Holders[i%len(Holders)]
	Reads      func() int64       // how many batched reads Candidates.S has made (Candidates.Reads.Load, or the store's own count)

	TTL, Renew, Retry time.Duration // the electors' timings
	// ReadEvery is the shortest time between two batched reads, on
	// average: the store reads at most (TTL+Renew)/ReadEvery + 2 times
	// while the holders renew for TTL+Renew.
	ReadEvery time.Duration
	// HandoffMedian and HandoffMax bound the time from a holder's Resign
	// to its candidate's term.
	HandoffMedian, HandoffMax time.Duration
	// TakeoverMax bounds the time from a holder's Abandon to its
	// candidate's term.
	TakeoverMax time.Duration
}

// CandidatesMakeNoCalls runs Leases holders and, on c.Candidates, one
// candidate per lease. While the holders renew, the candidates make no
// TryAcquire after their first and the store reads in batches; half the
// holders then resign, and each release is taken over within the handoff
// bounds with one TryAcquire; the other half abandon their terms, and each
// lease is taken over after TTL since its last renewal at the earliest and
// within c.TakeoverMax, with about one TryAcquire each.
func CandidatesMakeNoCalls[S counting.Watching](t *testing.T, c Case[S]) {
	const n = Leases
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	name := func(i int) string { return fmt.Sprintf("many/%d", i) }

	// The holders' terms start spread over a RenewInterval, so that their
	// renewals do not queue for a connection past their deadline on a
	// loaded machine.
	terms := make([]elector.Term, n)
	for i := range n {
		e, err := elector.New(c.Holders[i%len(c.Holders)], name(i), elector.Config{TTL: c.TTL, RenewInterval: c.Renew, Holder: "holder"})
		require.NoError(t, err)
		terms[i], err = e.Campaign(ctx)
		require.NoError(t, err)
		time.Sleep(c.Renew / n)
	}
	t.Cleanup(func() {
		for _, tm := range terms {
			_ = tm.Resign(context.Background())
		}
	})

	type won struct {
		i    int
		at   time.Time
		term elector.Term
		err  error
	}
	results := make(chan won, n)
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	for i := range n {
		e, err := elector.New(c.Candidates, name(i), elector.Config{TTL: c.TTL, RenewInterval: c.Renew, RetryInterval: c.Retry, Holder: "candidate"})
		require.NoError(t, err)
		wg.Go(func() {
			tm, err := e.Campaign(cctx)
			results <- won{i, time.Now(), tm, err}
		})
	}
	next := func(what string) won {
		t.Helper()
		select {
		case r := <-results:
			require.NoError(t, r.err, "%s: candidate %d", what, r.i)
			t.Cleanup(func() { _ = r.term.Resign(context.Background()) })
			return r
		case <-time.After(2*c.TTL + c.Retry + 5*time.Second):
			t.Fatalf("%s: no candidate took over", what)
			return won{}
		}
	}

	for deadline := time.Now().Add(10 * time.Second); c.Candidates.Acquires.Load() < n; time.Sleep(5 * time.Millisecond) {
		require.False(t, time.Now().After(deadline), "every candidate's first TryAcquire within 10s")
	}
	reads0 := c.Reads()
	time.Sleep(c.TTL + c.Renew) // long enough for any watch that saw no renewal to complete
	assert.EqualValues(t, n, c.Candidates.Acquires.Load(), "waiting candidates must make no TryAcquire while the holders renew")
	reads := c.Reads() - reads0
	t.Logf("%d batched reads for %d candidates in %v", reads, n, c.TTL+c.Renew)
	// The hub polls at least every SafetyMargin(TTL)/2, jittered to half.
	every := min(c.ReadEvery, elector.SafetyMargin(c.TTL)/4)
	assert.LessOrEqual(t, reads, int64((c.TTL+c.Renew)/every)+2, "one read per poll for all candidates")
	assert.GreaterOrEqual(t, reads, int64(2), "the watcher must read")
	select {
	case r := <-results:
		t.Fatalf("candidate %d returned while its holder renewed: %v", r.i, r.err)
	default:
	}

	// Releases: candidate i takes lease i over once its holder resigns.
	var handoffs []time.Duration
	for i := range n / 2 {
		start := time.Now()
		require.NoError(t, terms[i].Resign(ctx))
		r := next("release")
		require.Equal(t, i, r.i, "only the released lease may change hands; the holder of lease %d: %v", r.i, terms[r.i].Err())
		handoffs = append(handoffs, r.at.Sub(start))
	}
	slices.Sort(handoffs)
	t.Logf("handoff after release: median %v, max %v", handoffs[len(handoffs)/2], handoffs[len(handoffs)-1])
	assert.Less(t, handoffs[len(handoffs)/2], c.HandoffMedian, "a release must wake its candidate, not its RetryInterval")
	assert.Less(t, handoffs[len(handoffs)-1], c.HandoffMax)
	assert.EqualValues(t, n+n/2, c.Candidates.Acquires.Load(), "one TryAcquire per released lease")

	// Crashes: the other holders stop renewing. Each candidate takes over
	// once it has seen the last version for TTL, and never before TTL
	// after the last renewal (at most Renew before the abandon).
	abandoned := time.Now()
	for i := n / 2; i < n; i++ {
		terms[i].Abandon()
	}
	var failovers []time.Duration
	for range n - n/2 {
		r := next("abandon")
		require.GreaterOrEqual(t, r.i, n/2)
		failovers = append(failovers, r.at.Sub(abandoned))
	}
	slices.Sort(failovers)
	t.Logf("takeover after the holder stopped renewing: min %v, median %v, max %v",
		failovers[0], failovers[len(failovers)/2], failovers[len(failovers)-1])
	assert.Greater(t, failovers[0], c.TTL-c.Renew, "no takeover before TTL after the last renewal")
	assert.Less(t, failovers[len(failovers)-1], c.TakeoverMax)
	// A renewal that the server commits after its caller gave up, at the
	// abandon, may land after the candidate read the lease: that
	// candidate's compare-and-set then fails and it watches once more.
	// Allow a few of those, no polling.
	acquires := c.Candidates.Acquires.Load()
	assert.GreaterOrEqual(t, acquires, int64(2*n))
	assert.LessOrEqual(t, acquires, int64(2*n+n/10), "one TryAcquire per takeover: candidates wake when their watch completes")
}
