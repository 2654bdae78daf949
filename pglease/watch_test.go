package pglease

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/counting"
	"github.com/leaderaware/leaderaware/internal/testing/watchtest"
)

// TestWaitingCandidatesMakeNoCalls: 100 candidates waiting on one Store make
// no TryAcquire of their own while the holders (on other Stores) renew, and
// the core reads all 100 leases with one GetMany per poll; a release is
// taken over in milliseconds (NOTIFY), far below a poll; a lease whose
// holder stopped renewing, within TTL + a poll + a margin.
func TestWaitingCandidatesMakeNoCalls(t *testing.T) {
	schema := freshSchema(t)
	c := watchtest.Case[*Store]{
		Candidates: &counting.Store[*Store]{S: openStore(t, WithSchema(schema))},
		TTL:        3 * time.Second, Renew: time.Second, Retry: 500 * time.Millisecond,
	}
	for range 5 { // two lease connections each
		c.Holders = append(c.Holders, openStore(t, WithSchema(schema)))
	}
	c.Reads = c.Candidates.Reads.Load
	c.ReadEvery = c.Retry / 2
	c.HandoffMedian, c.HandoffMax = c.Retry/5, wakeBound
	c.TakeoverMax = c.TTL + c.Retry + time.Second
	watchtest.CandidatesMakeNoCalls(t, c)
}

// TestHandoffAcrossStores proves what the listener is for: when a leader on
// one Store resigns, a candidate on another Store that found the lease held
// takes over within a bound far below its RetryInterval (5s) and TTL (3s),
// round after round. Each round's watch starts the candidate Store's
// listener anew, so the bound includes its connect.
func TestHandoffAcrossStores(t *testing.T) {
	const (
		rounds = 6
		bound  = time.Second
	)
	schema := freshSchema(t)
	stores := [2]*Store{openStore(t, WithSchema(schema)), openStore(t, WithSchema(schema))}
	cfg := elector.Config{TTL: 3 * time.Second, RetryInterval: 5 * time.Second}
	var (
		electors [2]*elector.LeaseElector
		waiting  [2]heldObserver
	)
	for i, s := range stores {
		c := cfg
		c.Holder = unique("handoff-")
		waiting[i] = make(heldObserver, 1)
		c.Observer = waiting[i]
		e, err := elector.New(s, "handoff", c)
		require.NoError(t, err)
		electors[i] = e
	}
	term, err := electors[0].Campaign(testCtx(t))
	require.NoError(t, err)
	var took []time.Duration
	for round := range rounds {
		next, held := electors[(round+1)%2], waiting[(round+1)%2]
		drainHeld(held)
		type result struct {
			term elector.Term
			err  error
		}
		got := make(chan result, 1)
		ctx, cancel := context.WithTimeout(testCtx(t), 30*time.Second)
		go func() {
			tm, err := next.Campaign(ctx)
			got <- result{tm, err}
		}()
		select { // the candidate waits: it found the lease held
		case <-held:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the candidate did not find the lease held within 10s", round)
		}
		require.NoError(t, term.Resign(testCtx(t)))
		start := time.Now()
		r := <-got
		elapsed := time.Since(start)
		cancel()
		require.NoError(t, r.err, "round %d", round)
		took = append(took, elapsed)
		assert.Less(t, elapsed, bound, "round %d: handoff took %v, RetryInterval is %v", round, elapsed, cfg.RetryInterval)
		term = r.term
	}
	require.NoError(t, term.Resign(testCtx(t)))
	slices.Sort(took)
	t.Logf("handoff times %v, median %v", took, took[len(took)/2])
}

// heldObserver receives a value, without blocking, when its elector's
// campaign finds the lease held.
type heldObserver chan struct{}

func (o heldObserver) Observe(ev elector.Event) {
	if ev.Kind == elector.EventCampaign && ev.Result == elector.ResultHeld {
		select {
		case o <- struct{}{}:
		default:
		}
	}
}

// drainHeld empties o.
func drainHeld(o heldObserver) {
	for {
		select {
		case <-o:
		default:
			return
		}
	}
}
