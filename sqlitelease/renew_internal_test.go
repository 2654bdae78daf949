package sqlitelease

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// batchStore opens a Store holding n leases (holder "a"), with renewAll
// wrapped to record the size of each batch.
func batchStore(t *testing.T, n int) (s *Store, path string, leases []elector.Lease, sizes func() []int) {
	path = filepath.Join(t.TempDir(), "leases.db")
	s, err := Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	for i := range n {
		l, err := s.TryAcquire(t.Context(), fmt.Sprintf("job-%02d", i), "a", time.Minute, elector.Lease{})
		require.NoError(t, err)
		leases = append(leases, l)
	}
	var (
		mu  sync.Mutex
		got []int
	)
	renewAll := s.worker.renewAll
	s.worker.renewAll = func(batch []*renewReq) {
		mu.Lock()
		got = append(got, len(batch))
		mu.Unlock()
		renewAll(batch)
	}
	return s, path, leases, func() []int {
		mu.Lock()
		defer mu.Unlock()
		return append([]int(nil), got...)
	}
}

// lineUp keeps the worker busy while the renewals that start lines up
// behind it, then lets it go on.
func lineUp(t *testing.T, s *Store, start func()) {
	busy, release := make(chan struct{}), make(chan struct{})
	go func() {
		_ = s.worker.run(context.Background(), func() error { close(busy); <-release; return nil })
	}()
	<-busy
	start()
	time.Sleep(50 * time.Millisecond) // time for the renewals to line up
	close(release)
}

// lockFile holds the file's write lock from another connection until
// unlock.
func lockFile(t *testing.T, path string) (unlock func()) {
	db, err := sql.Open("sqlite", path+"?_txlock=immediate")
	require.NoError(t, err)
	tx, err := db.Begin()
	require.NoError(t, err)
	var once sync.Once
	unlock = func() { once.Do(func() { _ = tx.Rollback(); _ = db.Close() }) }
	t.Cleanup(unlock)
	return unlock
}

type renewed struct {
	i   int
	l   elector.Lease
	err error
}

// renewAsync renews l on a goroutine; the result, tagged i, goes to out.
func renewAsync(s *Store, ctx context.Context, i int, l elector.Lease, ttl time.Duration, out chan<- renewed) {
	go func() {
		got, err := s.Renew(ctx, l, ttl)
		out <- renewed{i, got, err}
	}()
}

// TestRenewBatch: renewals that wait while the worker is busy go together,
// in fewer statements than renewals, and each gets its own result: the
// current terms are renewed (their new versions stored), a lost one is
// refused, and one whose caller gave up before the worker took it is not
// run.
func TestRenewBatch(t *testing.T) {
	const n = 50
	s, _, leases, sizes := batchStore(t, n)
	ctx := t.Context()
	lost := leases[0]
	lost.Token-- // an older term of job-00

	results := make(chan renewed, n+1)
	lineUp(t, s, func() {
		for i, l := range append(leases, lost) {
			renewAsync(s, ctx, i, l, 2*time.Minute, results)
		}
		gaveUp, cancel := context.WithCancel(ctx)
		cancel()
		_, err := s.Renew(gaveUp, leases[1], time.Minute)
		require.ErrorIs(t, err, context.Canceled)
	})
	for range n + 1 {
		r := <-results
		if r.i == n {
			require.ErrorIs(t, r.err, elector.ErrLeaseLost, "the older term")
			continue
		}
		require.NoError(t, r.err, leases[r.i].Name)
		assert.Greater(t, r.l.Version, leases[r.i].Version)
		assert.Equal(t, 2*time.Minute, r.l.TTL)
		stored, err := s.Get(ctx, r.l.Name)
		require.NoError(t, err)
		assert.Equal(t, r.l.Version, stored.Version)
		assert.Equal(t, 2*time.Minute, stored.TTL)
	}
	t.Logf("%d renewals in %d statements: %v", n+1, len(sizes()), sizes())
	assert.Less(t, len(sizes()), n+1, "renewals that waited went together")
}

// TestRenewBatchTerms: in one batch, a renewal that names the right token
// but another holder is refused, and two renewals of one term are two
// writes, each with its own version.
func TestRenewBatchTerms(t *testing.T) {
	s, _, leases, sizes := batchStore(t, 2)
	ctx := t.Context()
	other := leases[0]
	other.Holder = "mallory"
	results := make(chan renewed, 4)
	lineUp(t, s, func() {
		renewAsync(s, ctx, 0, leases[0], time.Minute, results)
		renewAsync(s, ctx, 1, other, time.Minute, results)
		renewAsync(s, ctx, 2, leases[1], time.Second, results)
		renewAsync(s, ctx, 3, leases[1], time.Minute, results)
	})
	versions := map[uint64]bool{}
	for range 4 {
		r := <-results
		switch r.i {
		case 1:
			require.ErrorIs(t, r.err, elector.ErrLeaseLost, "another holder's renewal")
		case 0:
			require.NoError(t, r.err)
		default:
			require.NoError(t, r.err)
			versions[r.l.Version] = true
		}
	}
	require.Len(t, versions, 2, "two renewals of one term: two versions")
	stored, err := s.Get(ctx, leases[1].Name)
	require.NoError(t, err)
	for v := range versions {
		assert.Greater(t, v, leases[1].Version)
		assert.LessOrEqual(t, v, stored.Version)
	}
	assert.True(t, versions[stored.Version], "the row has the later renewal's version")
	t.Logf("batches: %v", sizes())
}

// TestRenewBatchDeadlines: a batch runs as long as one of its callers
// waits. On a file another connection keeps locked for 300 ms, a renewal
// with 10 s to go succeeds although the one batched with it gives up at
// its 100 ms deadline; when all the callers of a batch cancel, they
// return at once and the batch ends, the file still locked.
func TestRenewBatchDeadlines(t *testing.T) {
	s, path, leases, _ := batchStore(t, 2)
	unlock := lockFile(t, path)
	time.AfterFunc(300*time.Millisecond, unlock)
	short, cancelShort := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancelShort()
	long, cancelLong := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancelLong()
	results := make(chan renewed, 2)
	lineUp(t, s, func() {
		renewAsync(s, short, 0, leases[0], time.Minute, results)
		renewAsync(s, long, 1, leases[1], time.Minute, results)
	})
	for range 2 {
		r := <-results
		if r.i == 0 {
			require.ErrorIs(t, r.err, context.DeadlineExceeded)
		} else {
			require.NoError(t, r.err, "the renewal with time left waits the lock out")
		}
	}

	unlock = lockFile(t, path)
	ctx, cancel := context.WithCancel(t.Context())
	lineUp(t, s, func() {
		renewAsync(s, ctx, 0, leases[0], time.Minute, results)
		renewAsync(s, ctx, 1, leases[1], time.Minute, results)
	})
	cancel()
	for range 2 {
		require.ErrorIs(t, (<-results).err, context.Canceled)
	}
	free, cancelFree := context.WithTimeout(t.Context(), time.Second)
	defer cancelFree()
	require.NoError(t, s.worker.run(free, func() error { return nil }), "the batch ended with its callers")
	unlock()
}
