package mysqllease

import (
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/internal/testing/counting"
	"github.com/leaderaware/leaderaware/internal/testing/watchtest"
)

// TestCandidatesMakeNoCalls: 100 candidates waiting on one Store make no
// TryAcquire of their own while the holders (on other Stores) renew: the
// elector reads all 100 leases with one GetMany (one statement) per
// RetryInterval, 250ms here. A lease released elsewhere is taken over
// within about one RetryInterval; a lease whose holder stopped renewing,
// within TTL + a poll + a margin of its last write, which may be a renewal
// in flight at the abandon that commits up to a RenewInterval later.
func TestCandidatesMakeNoCalls(t *testing.T) {
	table := freshTable(t)
	c := watchtest.Case[*Store]{
		Candidates: &counting.Store[*Store]{S: openStore(t, table)},
		TTL:        3 * time.Second, Renew: time.Second, Retry: 250 * time.Millisecond,
	}
	for range 5 {
		c.Holders = append(c.Holders, openStore(t, table))
	}
	c.Reads = c.Candidates.Reads.Load
	c.ReadEvery = c.Retry / 2
	c.HandoffMedian, c.HandoffMax = c.Retry+250*time.Millisecond, c.Retry+time.Second
	c.TakeoverMax = c.TTL + c.Renew + c.Retry + time.Second
	watchtest.CandidatesMakeNoCalls(t, c)
}
