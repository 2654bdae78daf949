package sqlitelease_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// wakeBound is the most a watcher may wait for a release: far above the
// 20 ms poll, far below any RetryInterval.
const wakeBound = time.Second

func requireWoken(t *testing.T, ch <-chan struct{}, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-ch:
		return time.Since(start)
	case <-time.After(within):
		t.Fatalf("watcher not woken within %v", within)
		return 0
	}
}

func requireNotWoken(t *testing.T, ch <-chan struct{}, during time.Duration) {
	t.Helper()
	select {
	case <-ch:
		t.Fatal("watcher woken while the lease stayed held")
	case <-time.After(during):
	}
}

// TestWatchReleaseSameStore: a release through the store wakes its own
// watchers at once, without the poller.
func TestWatchReleaseSameStore(t *testing.T) {
	s := open(t)
	l, err := s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	_, err = s.TryAcquire(bg(t), "other-job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	ch, stop := s.WatchRelease("job")
	defer stop()
	other, stopOther := s.WatchRelease("other-job")
	defer stopOther()
	require.NoError(t, s.Release(bg(t), l))
	select {
	case <-ch:
	default:
		t.Fatal("a local release must wake the watcher before Release returns")
	}
	requireNotWoken(t, other, 100*time.Millisecond)
}

// TestWatchReleaseOtherStore: a release from a second Store on the file,
// standing in for another process, wakes a watcher of the first quickly.
func TestWatchReleaseOtherStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	s1, s2 := openPath(t, path), openPath(t, path)
	l, err := s2.TryAcquire(bg(t), "job", "b", time.Minute, elector.Lease{})
	require.NoError(t, err)

	ch, stop := s1.WatchRelease("job")
	defer stop()
	// Changes while the lease stays held wake nobody: a renewal, a job write.
	time.Sleep(50 * time.Millisecond) // let the poller take its first reading
	select {
	case <-ch: // the first reading may wake spuriously
	default:
	}
	l, err = s2.Renew(bg(t), l, time.Minute)
	require.NoError(t, err)
	_, err = s2.DB().ExecContext(bg(t), `CREATE TABLE job_data (x INTEGER)`)
	require.NoError(t, err)
	requireNotWoken(t, ch, 150*time.Millisecond)

	require.NoError(t, s2.Release(bg(t), l))
	took := requireWoken(t, ch, wakeBound)
	t.Logf("woken %v after the other store's release", took)
}

// TestWatchPollerStops: the poller goroutine runs only while someone
// watches, and Close stops it even if a watcher never called stop.
func TestWatchPollerStops(t *testing.T) {
	s := open(t)
	base := goleak.IgnoreCurrent()

	_, stop1 := s.WatchRelease("a")
	_, stop2 := s.WatchRelease("b")
	stop1()
	stop1() // stop is idempotent
	require.Error(t, goleak.Find(base), "one watcher remains, so the poller runs")
	stop2()
	require.NoError(t, goleak.Find(base), "the last stop ends the poller")

	_, _ = s.WatchRelease("c") // never stopped
	require.NoError(t, s.Close())
	require.NoError(t, goleak.Find(base), "Close ends the poller")
}

// TestWatchAfterClose: watching a closed store starts nothing.
func TestWatchAfterClose(t *testing.T) {
	s, err := sqlitelease.Open(filepath.Join(t.TempDir(), "leases.db"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	base := goleak.IgnoreCurrent()
	ch, stop := s.WatchRelease("job")
	require.NoError(t, goleak.Find(base))
	stop()
	requireNotWoken(t, ch, 50*time.Millisecond)
}
