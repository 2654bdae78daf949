package etcdlease

import (
	"fmt"
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
// taken over in milliseconds (the watch pushes it), far below a poll; a
// lease whose holder stopped renewing, within TTL + a poll + a margin.
func TestWaitingCandidatesMakeNoCalls(t *testing.T) {
	srv := startEtcd(t)
	prefix := uniquePrefix()
	c := watchtest.Case[*Store]{
		Candidates: &counting.Store[*Store]{S: openStore(t, srv, WithPrefix(prefix))},
		TTL:        3 * time.Second, Renew: time.Second, Retry: 500 * time.Millisecond,
	}
	for range 3 {
		c.Holders = append(c.Holders, openStore(t, srv, WithPrefix(prefix)))
	}
	c.Reads = c.Candidates.Reads.Load
	c.ReadEvery = c.Retry / 2
	c.HandoffMedian, c.HandoffMax = c.Retry/5, pushBound
	c.TakeoverMax = c.TTL + c.Retry + time.Second
	watchtest.CandidatesMakeNoCalls(t, c)
}

// TestTermsRenewTogether proves that the core renews the terms one Store
// holds with RenewMany, in few transactions: 50 terms renewed every 300ms
// for 2s take far fewer etcd transactions than renewals.
func TestTermsRenewTogether(t *testing.T) {
	const n = 50
	srv := startEtcd(t)
	s, kv := countingStore(t, srv, uniquePrefix())
	cfg := elector.Config{TTL: 3 * time.Second, RenewInterval: 300 * time.Millisecond, Holder: "a"}
	terms := make([]elector.Term, n)
	for i := range terms {
		e, err := elector.New(s, fmt.Sprintf("together-%02d", i), cfg)
		require.NoError(t, err)
		terms[i], err = e.Campaign(testCtx(t))
		require.NoError(t, err)
	}
	from, start := kv.txns.Load(), time.Now()
	time.Sleep(2 * time.Second) // several renewals of every term
	txns, elapsed := kv.txns.Load()-from, time.Since(start)
	renewals := 0
	for _, tm := range terms {
		cur, err := s.Get(testCtx(t), tm.Lease().Name)
		require.NoError(t, err)
		require.Equal(t, tm.Token(), cur.Token)
		require.Greater(t, cur.Version, tm.Token(), "renewed")
		renewals += int(elapsed / cfg.RenewInterval)
		require.NoError(t, tm.Resign(testCtx(t)))
	}
	t.Logf("about %d renewals of %d terms in %d transactions over %v", renewals, n, txns, elapsed)
	assert.Greater(t, txns, int64(0))
	assert.Less(t, txns*5, int64(renewals), "renewals go together")
}
