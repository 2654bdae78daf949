package apiservertest_test

import (
	"testing"
	"time"

	countcalls "github.com/leaderaware/leaderaware/internal/testing/counting"
	"github.com/leaderaware/leaderaware/internal/testing/watchtest"
	"github.com/leaderaware/leaderaware/k8slease"
)

// TestWaitingCandidatesMakeNoCalls: 100 candidates waiting on one Store make
// no TryAcquire of their own while the holders (on other Stores) renew, and
// the core reads all 100 leases with one GetMany (one List) per poll; a
// release is taken over in about one watch event, far below a poll; a
// lease whose holder stopped renewing, within TTL + a poll + a margin.
func TestWaitingCandidatesMakeNoCalls(t *testing.T) {
	ns := newNamespace(t)
	c := watchtest.Case[*k8slease.Store]{
		Candidates: &countcalls.Store[*k8slease.Store]{S: newStore(t, ns)},
		TTL:        3 * time.Second, Renew: time.Second, Retry: 500 * time.Millisecond,
	}
	for range 3 {
		c.Holders = append(c.Holders, newStore(t, ns))
	}
	c.Reads = c.Candidates.Reads.Load
	c.ReadEvery = c.Retry / 2
	c.HandoffMedian, c.HandoffMax = c.Retry/5, 2*time.Second
	c.TakeoverMax = c.TTL + c.Retry + time.Second
	watchtest.CandidatesMakeNoCalls(t, c)
}
