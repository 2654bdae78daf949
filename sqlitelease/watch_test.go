package sqlitelease_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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

// requireState waits for the watcher to receive want (the same Token and
// Version), skipping older states, and fails on a newer one.
func requireState(t *testing.T, ch <-chan elector.Lease, want elector.Lease, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.After(within)
	for {
		select {
		case got := <-ch:
			if got.Token == want.Token && got.Version == want.Version {
				if want.Token != 0 {
					assert.Equal(t, want.Name, got.Name)
					assert.Equal(t, want.Holder, got.Holder)
					assert.Equal(t, want.TTL, got.TTL)
				}
				return time.Since(start)
			}
			require.False(t, got.Token > want.Token || got.Token == want.Token && got.Version > want.Version,
				"received %+v, newer than %+v", got, want)
		case <-deadline:
			t.Fatalf("the watcher did not receive token %d version %d within %v", want.Token, want.Version, within)
			return 0
		}
	}
}

// requireNoState asserts that the watcher receives nothing for a while.
func requireNoState(t *testing.T, ch <-chan elector.Lease, during time.Duration) {
	t.Helper()
	select {
	case got := <-ch:
		t.Fatalf("the watcher received %+v while the lease did not change", got)
	case <-time.After(during):
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

// TestWatchLeaseSameStore: a release through the store delivers the zero
// Lease to its own watchers at once, and to no watcher of another lease.
func TestWatchLeaseSameStore(t *testing.T) {
	s := open(t)
	l, err := s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	o, err := s.TryAcquire(bg(t), "other-job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	ch, stop := s.WatchLease("job", time.Second)
	defer stop()
	other, stopOther := s.WatchLease("other-job", time.Second)
	defer stopOther()
	requireState(t, ch, l, wakeBound)
	requireState(t, other, o, wakeBound)

	require.NoError(t, s.Release(bg(t), l))
	select {
	case got := <-ch:
		require.Zero(t, got, "a local release must deliver the zero Lease")
	default:
		t.Fatal("a local release must reach the watcher before Release returns")
	}
	requireNoState(t, other, 100*time.Millisecond)
	requireNoState(t, ch, 100*time.Millisecond) // the poller's read of the release is no news
}

// TestWatchLeaseOtherStore: a watcher of one Store receives each state that
// a second Store on the file (standing in for another process) writes
// (acquire, renew, release), and nothing for changes that leave the lease
// as it was. A renewal arrives with the read every `every`.
func TestWatchLeaseOtherStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	s1, s2 := openPath(t, path), openPath(t, path)
	ch, stop := s1.WatchLease("job", 200*time.Millisecond)
	defer stop()
	requireState(t, ch, elector.Lease{}, wakeBound) // free at first

	l, err := s2.TryAcquire(bg(t), "job", "b", time.Minute, elector.Lease{})
	require.NoError(t, err)
	requireState(t, ch, l, wakeBound)
	l, err = s2.Renew(bg(t), l, 2*time.Minute)
	require.NoError(t, err)
	requireState(t, ch, l, wakeBound)

	_, err = s2.TryAcquire(bg(t), "other-job", "b", time.Minute, elector.Lease{})
	require.NoError(t, err)
	_, err = s2.DB().ExecContext(bg(t), `CREATE TABLE job_data (x INTEGER)`)
	require.NoError(t, err)
	requireNoState(t, ch, 150*time.Millisecond)

	require.NoError(t, s2.Release(bg(t), l))
	took := requireState(t, ch, elector.Lease{}, wakeBound)
	t.Logf("the zero Lease arrived %v after the other store's release", took)
}

// TestWatchLeaseEachRelease: every release of a lease reaches a watcher,
// even one whose last state was already free because the term in between
// came and went before the Store read it. (A candidate that got the first
// zero Lease lost that term to its TryAcquire, and waits for its release.)
// The watch interval is an hour: outside Linux the Store reads only when a
// new lease is watched.
func TestWatchLeaseEachRelease(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	s1, s2 := openPath(t, path, sqlitelease.WithWatchInterval(time.Hour)), openPath(t, path)
	ch, stop := s1.WatchLease("job", time.Hour)
	defer stop()
	requireState(t, ch, elector.Lease{}, wakeBound) // free at first

	for i := range 2 {
		l, err := s2.TryAcquire(bg(t), "job", "b", time.Minute, elector.Lease{})
		require.NoError(t, err)
		require.NoError(t, s2.Release(bg(t), l))
		_, stopOther := s1.WatchLease(fmt.Sprintf("other-%d", i), time.Hour) // a read
		defer stopOther()
		// On Linux the liveness file woke the Store for the term too.
		deadline := time.After(wakeBound)
	wait:
		for {
			select {
			case got := <-ch:
				if got.Token == 0 {
					break wait
				}
				require.Equal(t, l.Token, got.Token, "only the term itself may come before its release")
			case <-deadline:
				t.Fatalf("the release of token %d did not reach the watcher within %v", l.Token, wakeBound)
			}
		}
	}
}

// TestWatchLeaseLateWatcher: a second watcher of a lease that the Store
// already follows gets its current state at once, and the first watcher
// nothing new.
func TestWatchLeaseLateWatcher(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	s1, s2 := openPath(t, path), openPath(t, path)
	l, err := s2.TryAcquire(bg(t), "job", "b", time.Minute, elector.Lease{})
	require.NoError(t, err)
	first, stop := s1.WatchLease("job", time.Minute)
	defer stop()
	requireState(t, first, l, wakeBound)

	second, stop2 := s1.WatchLease("job", time.Minute)
	defer stop2()
	select {
	case got := <-second:
		assert.Equal(t, l.Version, got.Version)
	default:
		t.Fatal("a lease already followed is delivered when the watch starts")
	}
	requireNoState(t, first, 50*time.Millisecond)
}

// TestWatchPollerStops: the poller goroutine runs only while someone
// watches, and Close stops it even if a watcher never called stop.
func TestWatchPollerStops(t *testing.T) {
	s := open(t)
	base := goleak.IgnoreCurrent()

	_, stop1 := s.WatchRelease("a")
	_, stop2 := s.WatchLease("b", time.Second)
	stop1()
	stop1() // stop is idempotent
	require.Error(t, goleak.Find(base), "one watcher remains, so the poller runs")
	stop2()
	require.NoError(t, goleak.Find(base), "the last stop ends the poller")

	_, _ = s.WatchLease("c", time.Second) // never stopped
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
	states, stopStates := s.WatchLease("job", time.Millisecond)
	require.NoError(t, goleak.Find(base))
	stop()
	stopStates()
	requireNotWoken(t, ch, 50*time.Millisecond)
	requireNoState(t, states, 50*time.Millisecond)
}

// TestWatchLeaseRenewalsCostNoReads: a Store watching many leases that
// another Store holds and keeps renewing reads them only once per every
// (here never: every is a minute), while a release and a new term by that
// Store still reach its watchers within a few watch intervals.
func TestWatchLeaseRenewalsCostNoReads(t *testing.T) {
	const n = 50
	path := filepath.Join(t.TempDir(), "leases.db")
	w, h := openPath(t, path), openPath(t, path)
	held := make([]elector.Lease, n)
	watches := make([]<-chan elector.Lease, n)
	for i := range n {
		l, err := h.TryAcquire(bg(t), fmt.Sprintf("job-%d", i), "h", time.Minute, elector.Lease{})
		require.NoError(t, err)
		held[i] = l
		ch, stop := w.WatchLease(l.Name, time.Minute)
		defer stop()
		watches[i] = ch
	}
	for i := range n {
		requireState(t, watches[i], held[i], wakeBound)
	}

	before, renewals := sqlitelease.WatchReads(w), 0
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); renewals++ {
		i := renewals % n
		var err error
		held[i], err = h.Renew(bg(t), held[i], time.Minute)
		require.NoError(t, err)
	}
	reads := sqlitelease.WatchReads(w) - before
	t.Logf("%d batched reads during 500 ms of renewals (%d renewals)", reads, renewals)
	assert.LessOrEqual(t, reads, uint64(1), "renewals alone call for no read before every has passed")

	select {
	case <-watches[7]: // a renewal, if the Store read after all
	default:
	}
	require.NoError(t, h.Release(bg(t), held[7]))
	took := requireState(t, watches[7], elector.Lease{}, wakeBound)
	t.Logf("the zero Lease arrived %v after the other store's release", took)
	next, err := h.TryAcquire(bg(t), held[7].Name, "h", time.Minute, elector.Lease{})
	require.NoError(t, err)
	took = requireState(t, watches[7], next, wakeBound)
	t.Logf("the new term arrived %v after the other store's acquire", took)
}

// TestWatchReleasedTermsCount: the count of released terms that watching
// Stores poll grows once per term that ends by a release or by the deletion
// of its unreleased row, and with no other lease statement: acquire (of a
// new, a released or a held lease), renew, fenced write, or the clearing of
// liveness records at Close.
func TestWatchReleasedTermsCount(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	s := openPath(t, path)
	count := func() int64 {
		t.Helper()
		var n int64
		require.NoError(t, s.DB().QueryRowContext(bg(t),
			`SELECT value FROM leaderaware_meta WHERE key = 'released_terms'`).Scan(&n))
		return n
	}
	require.Zero(t, count(), "a new file")

	l, err := s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	l, err = s.Renew(bg(t), l, time.Minute)
	require.NoError(t, err)
	jobTable(t, s)
	require.NoError(t, s.FencedLease(bg(t), l, insertPrice))
	other := openPath(t, path)
	l, err = other.TryAcquire(bg(t), "job", "b", time.Minute, l) // a takeover of the observed term
	require.NoError(t, err)
	assert.Zero(t, count(), "acquire, renew, fenced write, takeover")

	require.NoError(t, other.Release(bg(t), l))
	assert.EqualValues(t, 1, count(), "a release")
	require.NoError(t, other.Release(bg(t), l))
	assert.EqualValues(t, 1, count(), "the same release again changes nothing")
	_, err = s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	assert.EqualValues(t, 1, count(), "an acquire of a released lease")

	closing, err := sqlitelease.Open(path)
	require.NoError(t, err)
	_, err = closing.TryAcquire(bg(t), "held-at-close", "c", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, closing.Close()) // clears its liveness records (Linux)
	assert.EqualValues(t, 1, count(), "a Close that leaves its lease held")

	_, err = s.DB().ExecContext(bg(t), `DELETE FROM leaderaware_lease WHERE name = 'job'`)
	require.NoError(t, err)
	assert.EqualValues(t, 2, count(), "the deletion of a held lease ends its term")
	l, err = s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, s.Release(bg(t), l))
	_, err = s.DB().ExecContext(bg(t), `DELETE FROM leaderaware_lease WHERE name = 'job'`)
	require.NoError(t, err)
	assert.EqualValues(t, 3, count(), "the deletion of a released lease ends no term")
}
