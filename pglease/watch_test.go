package pglease

import (
	"context"
	"fmt"
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

// TestTermsRenewTogether proves that the core renews the terms one Store
// holds with RenewMany statements, never one Renew per term: 50 terms
// renewed every 300ms for 2s take far fewer statements than renewals.
func TestTermsRenewTogether(t *testing.T) {
	f := newBulkFixture(t, 0)
	const n = 50
	cfg := elector.Config{TTL: 3 * time.Second, RenewInterval: 300 * time.Millisecond, Holder: "a"}
	terms := make([]elector.Term, n)
	for i := range terms {
		e, err := elector.New(f.s, fmt.Sprintf("together/%02d", i), cfg)
		require.NoError(t, err)
		terms[i], err = e.Campaign(testCtx(t))
		require.NoError(t, err)
	}
	f.log.take()
	start := time.Now()
	time.Sleep(2 * time.Second) // several renewals of every term
	statements := f.log.take()
	elapsed := time.Since(start)
	var batches int
	for _, sql := range statements {
		assert.NotEqual(t, f.s.stmts.Renew, sql, "no term renews alone")
		if sql == f.s.stmts.RenewMany {
			batches++
		}
	}
	renewals := 0
	for _, tm := range terms {
		cur, err := f.s.Get(testCtx(t), tm.Lease().Name)
		require.NoError(t, err)
		require.Equal(t, tm.Token(), cur.Token)
		renewals += int(elapsed / cfg.RenewInterval)
		require.NoError(t, tm.Resign(testCtx(t)))
	}
	t.Logf("about %d renewals of %d terms in %d RenewMany statements over %v", renewals, n, batches, elapsed)
	assert.Greater(t, batches, 0)
	assert.Less(t, batches*5, renewals, "renewals go together")
}
