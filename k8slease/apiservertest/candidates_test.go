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
// lease whose holder stopped renewing, within 2 TTL + a poll + a margin: a
// List slower than TTL/10 (the API server under -race on a loaded machine)
// leaves a gap in the reads, which restarts a watch (see
// elector.LeaseElector.Campaign), so the TTL is 6s here and one restart is
// allowed for.
func TestWaitingCandidatesMakeNoCalls(t *testing.T) {
	ns := newNamespace(t)
	c := watchtest.Case[*k8slease.Store]{
		Candidates: &countcalls.Store[*k8slease.Store]{S: newStore(t, ns)},
		TTL:        6 * time.Second, Renew: 2 * time.Second, Retry: 500 * time.Millisecond,
	}
	for range 3 {
		c.Holders = append(c.Holders, newStore(t, ns))
	}
	c.Reads = c.Candidates.Reads.Load
	c.ReadEvery = c.Retry / 2
	c.HandoffMedian, c.HandoffMax = c.Retry/5, 2*time.Second
	c.TakeoverMax = 2*c.TTL + c.Retry + time.Second
	watchtest.CandidatesMakeNoCalls(t, c)
}
