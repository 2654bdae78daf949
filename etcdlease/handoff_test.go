package etcdlease

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// TestHandoffBetweenStores proves the point of the store's watch with two
// electors on two Stores (as on two hosts): when the leader resigns, the
// waiting candidate leads within milliseconds, long before its next poll
// (RetryInterval) or the lease's TTL, and with a larger token.
func TestHandoffBetweenStores(t *testing.T) {
	srv := startEtcd(t)
	prefix := uniquePrefix()
	cfg := elector.Config{TTL: time.Minute, RetryInterval: time.Minute}
	storeA, storeB := openStore(t, srv, WithPrefix(prefix)), openStore(t, srv, WithPrefix(prefix))
	cfg.Holder = "a"
	a, err := elector.New(storeA, "job", cfg)
	require.NoError(t, err)
	cfg.Holder = "b"
	b, err := elector.New(storeB, "job", cfg)
	require.NoError(t, err)

	termA, err := a.Campaign(testCtx(t))
	require.NoError(t, err)
	type result struct {
		term elector.Term
		err  error
		at   time.Time
	}
	got := make(chan result, 1)
	go func() {
		term, err := b.Campaign(testCtx(t))
		got <- result{term, err, time.Now()}
	}()
	require.Eventually(t, func() bool { return watchRunning(storeB) }, 10*time.Second, 5*time.Millisecond, "b waits on the watch")
	time.Sleep(100 * time.Millisecond)

	resigned := time.Now()
	require.NoError(t, termA.Resign(testCtx(t)))
	select {
	case r := <-got:
		require.NoError(t, r.err)
		t.Logf("b leads %v after a resigned", r.at.Sub(resigned))
		assert.Less(t, r.at.Sub(resigned), 2*time.Second)
		assert.Greater(t, r.term.Token(), termA.Token())
		require.NoError(t, r.term.Resign(testCtx(t)))
	case <-time.After(10 * time.Second):
		t.Fatal("b did not lead within 10s of a's resignation; RetryInterval and TTL are a minute")
	}
}
