package sqlitelease

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// TestRenewBatch: renewals that wait while the worker is busy go together,
// in fewer statements than renewals, and each gets its own result: the
// current terms are renewed (their new versions stored), a lost one is
// refused, and one whose caller gave up before the worker took it is not
// run.
func TestRenewBatch(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "leases.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	const n = 50
	leases := make([]elector.Lease, n)
	for i := range leases {
		leases[i], err = s.TryAcquire(ctx, fmt.Sprintf("job-%02d", i), "a", time.Minute, elector.Lease{})
		require.NoError(t, err)
	}
	lost := leases[0]
	lost.Token-- // an older term of job-00

	var (
		mu    sync.Mutex
		sizes []int
	)
	renewAll := s.worker.renewAll
	s.worker.renewAll = func(batch []*renewReq) {
		mu.Lock()
		sizes = append(sizes, len(batch))
		mu.Unlock()
		renewAll(batch)
	}
	// Keep the worker busy while the renewals line up.
	busy, release := make(chan struct{}), make(chan struct{})
	go func() {
		_ = s.worker.run(ctx, func() error { close(busy); <-release; return nil })
	}()
	<-busy

	type result struct {
		i   int
		l   elector.Lease
		err error
	}
	results := make(chan result, n+2)
	for i, l := range append(leases, lost) {
		go func() {
			got, err := s.Renew(ctx, l, 2*time.Minute)
			results <- result{i, got, err}
		}()
	}
	gaveUp, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.Renew(gaveUp, leases[1], time.Minute)
	require.ErrorIs(t, err, context.Canceled)
	time.Sleep(50 * time.Millisecond) // time for the renewals to line up
	close(release)

	for range n + 1 {
		r := <-results
		if r.i == n {
			require.ErrorIs(t, r.err, elector.ErrLeaseLost, "the older term")
			continue
		}
		require.NoError(t, r.err, leases[r.i].Name)
		assert.Equal(t, leases[r.i].Version+1, r.l.Version)
		assert.Equal(t, 2*time.Minute, r.l.TTL)
		stored, err := s.Get(ctx, r.l.Name)
		require.NoError(t, err)
		assert.Equal(t, r.l.Version, stored.Version)
		assert.Equal(t, 2*time.Minute, stored.TTL)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d renewals in %d statements: %v", n+1, len(sizes), sizes)
	assert.Less(t, len(sizes), n+1, "renewals that waited went together")
}
