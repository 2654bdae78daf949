package sqlitelease_test

import (
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// wakeBound is the most a push may take: far above the 20 ms watch
// interval outside Linux, far below any RetryInterval.
const wakeBound = time.Second

// notifications subscribes to s.Notify until the test ends.
func notifications(t *testing.T, s *sqlitelease.Store) <-chan elector.Change {
	ch := make(chan elector.Change, 1000)
	stop := s.Notify(func(c elector.Change) {
		select {
		case ch <- c:
		default:
		}
	})
	t.Cleanup(stop)
	return ch
}

// deathBound is the most a takeover may take after a holder's death: the
// kernel reports the close of the liveness file at once; the rest is
// margin for the race detector and a busy machine.
const deathBound = 250 * time.Millisecond

// requirePush waits for a push of name or of "" (read everything).
func requirePush(t *testing.T, ch <-chan elector.Change, name string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.After(within)
	for {
		select {
		case c := <-ch:
			if c.Name == "" || c.Name == name {
				return time.Since(start)
			}
		case <-deadline:
			t.Fatalf("no push for %q within %v", name, within)
			return 0
		}
	}
}

// requireNoPush asserts that nothing is pushed for a while.
func requireNoPush(t *testing.T, ch <-chan elector.Change, during time.Duration) {
	t.Helper()
	select {
	case c := <-ch:
		t.Fatalf("pushed %+v while no term began or ended", c)
	case <-time.After(during):
	}
}

// drain empties ch.
func drain(ch <-chan elector.Change) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// TestGetMany: one call reads many leases, in order: a held lease as Get
// returns it, a free one (never acquired, or released) as the zero Lease
// with only Name set.
func TestGetMany(t *testing.T) {
	s := open(t)
	ctx := bg(t)
	a, err := s.TryAcquire(ctx, "a", "h", time.Minute, elector.Lease{})
	require.NoError(t, err)
	b, err := s.TryAcquire(ctx, "b", "h", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, b))
	c, err := s.TryAcquire(ctx, "c", "h2", 2*time.Minute, elector.Lease{})
	require.NoError(t, err)

	got, err := s.GetMany(ctx, []string{"c", "never", "b", "a", "c"})
	require.NoError(t, err)
	want := []elector.Lease{c, {Name: "never"}, {Name: "b"}, a, c}
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, want[i].Name, got[i].Name, i)
		assert.Equal(t, want[i].Holder, got[i].Holder, i)
		assert.Equal(t, want[i].Token, got[i].Token, i)
		assert.Equal(t, want[i].Version, got[i].Version, i)
		assert.Equal(t, want[i].TTL, got[i].TTL, i)
	}
	one, err := s.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, one, got[3], "as Get reads it")
	for i, name := range []string{"c", "never", "b", "a"} { // one name takes its own statement
		single, err := s.GetMany(ctx, []string{name})
		require.NoError(t, err)
		assert.Equal(t, got[i], single[0], name)
	}

	none, err := s.GetMany(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, none)
	_, err = s.GetMany(ctx, []string{"a", ""})
	require.Error(t, err, "a bad name")
}

// TestGetManyHolderGone: on Linux, a lease whose holder's liveness lock is
// gone (its process died) reads as free, and TryAcquire then takes it at
// once; the lease of a live holder reads as held.
func TestGetManyHolderGone(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("liveness locks are Linux only")
	}
	path := filepath.Join(t.TempDir(), "leases.db")
	w, dead, alive := openPath(t, path), openPath(t, path), openPath(t, path)
	_, err := dead.TryAcquire(bg(t), "job", "dead", 15*time.Second, elector.Lease{})
	require.NoError(t, err)
	held, err := alive.TryAcquire(bg(t), "other-job", "alive", 15*time.Second, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, sqlitelease.Die(dead))

	got, err := w.GetMany(bg(t), []string{"job", "other-job"})
	require.NoError(t, err)
	assert.Equal(t, elector.Lease{Name: "job"}, got[0], "its holder is gone")
	assert.Equal(t, held.Token, got[1].Token, "its holder lives")
	single, err := w.GetMany(bg(t), []string{"job"})
	require.NoError(t, err)
	assert.Equal(t, got[:1], single, "read alone")
	l, err := w.TryAcquire(bg(t), "job", "w", 15*time.Second, elector.Lease{})
	require.NoError(t, err, "a lease GetMany reports free is taken at once")
	assert.Equal(t, "w", l.Holder)
}

// TestNotifyLocal: a release or an acquire through the Store is pushed by
// name before the call returns.
func TestNotifyLocal(t *testing.T) {
	s := open(t)
	ch := notifications(t, s)
	l, err := s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	requirePushed(t, ch, "job")
	require.NoError(t, s.Release(bg(t), l))
	requirePushed(t, ch, "job")
}

// requirePushed asserts that name was pushed already, and drains ch.
func requirePushed(t *testing.T, ch <-chan elector.Change, name string) {
	t.Helper()
	for {
		select {
		case c := <-ch:
			if c.Name == name {
				drain(ch)
				return
			}
		default:
			t.Fatalf("%q was not pushed before the call returned", name)
		}
	}
}

// TestNotifyOtherStore: a release and a new term by a second Store on the
// file (standing in for another process) are pushed quickly; a renewal and
// a job's write, which change no term, are not.
func TestNotifyOtherStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	s1, s2 := openPath(t, path), openPath(t, path)
	l, err := s2.TryAcquire(bg(t), "job", "b", time.Minute, elector.Lease{})
	require.NoError(t, err)
	ch := notifications(t, s1)
	time.Sleep(50 * time.Millisecond) // the wake source's first reading
	drain(ch)

	l, err = s2.Renew(bg(t), l, time.Minute)
	require.NoError(t, err)
	_, err = s2.DB().ExecContext(bg(t), `CREATE TABLE job_data (x INTEGER)`)
	require.NoError(t, err)
	requireNoPush(t, ch, 150*time.Millisecond)

	require.NoError(t, s2.Release(bg(t), l))
	t.Logf("pushed %v after the other store's release", requirePush(t, ch, "job", wakeBound))
	_, err = s2.TryAcquire(bg(t), "job", "b", time.Minute, elector.Lease{})
	require.NoError(t, err)
	t.Logf("pushed %v after the other store's acquire", requirePush(t, ch, "job", wakeBound))
}

// TestNotifyWakesOnEvents: on Linux the liveness file, not the watch
// interval (an hour here), tells a Store what another Store did: a
// release, a new term and the death of the new holder are each pushed at
// once, and after the death GetMany reports the lease free.
func TestNotifyWakesOnEvents(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("inotify is Linux only")
	}
	path := filepath.Join(t.TempDir(), "leases.db")
	w := openPath(t, path, sqlitelease.WithWatchInterval(time.Hour))
	a, b := openPath(t, path), openPath(t, path)
	l, err := a.TryAcquire(bg(t), "job", "a", 15*time.Second, elector.Lease{})
	require.NoError(t, err)
	ch := notifications(t, w)

	require.NoError(t, a.Release(bg(t), l))
	t.Logf("a release by another Store pushed after %v", requirePush(t, ch, "job", deathBound))
	_, err = b.TryAcquire(bg(t), "job", "b", 15*time.Second, elector.Lease{})
	require.NoError(t, err)
	t.Logf("a new term by another Store pushed after %v", requirePush(t, ch, "job", deathBound))

	time.Sleep(20 * time.Millisecond) // the touch's events are in
	drain(ch)
	require.NoError(t, sqlitelease.Die(b))
	deadline := time.Now().Add(deathBound)
	for {
		requirePush(t, ch, "job", time.Until(deadline))
		got, err := w.GetMany(bg(t), []string{"job"})
		require.NoError(t, err)
		if got[0].Token == 0 {
			break // the kernel may report the close just before it drops the lock
		}
	}
	t.Logf("the death of its holder pushed and read after %v", deathBound-time.Until(deadline))
}

// TestNotifyStops: the wake source runs only while someone is notified,
// Close stops it even if a subscriber never called stop, no callback runs
// after its stop returned, and Notify on a closed Store starts nothing.
func TestNotifyStops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	s := openPath(t, path)
	base := goleak.IgnoreCurrent()

	calls := 0 // no lock: a call after stop would race
	stop1 := s.Notify(func(elector.Change) { calls++ })
	stop2 := s.Notify(func(elector.Change) {})
	stop1()
	stop1() // stop is idempotent
	n := calls
	_, err := s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	assert.Equal(t, n, calls, "no call after stop")
	require.Error(t, goleak.Find(base), "one subscriber remains, so the wake source runs")
	stop2()
	require.NoError(t, goleak.Find(base), "the last stop ends the wake source")

	_ = s.Notify(func(elector.Change) {}) // never stopped
	require.NoError(t, s.Close())
	require.NoError(t, goleak.Find(base), "Close ends the wake source")
	stop := s.Notify(func(elector.Change) { t.Error("called after Close") })
	require.NoError(t, goleak.Find(base))
	stop()
}

// TestReleasedTermsCount: the count of released terms that the wake source
// Stores poll grows once per term that ends by a release or by the deletion
// of its unreleased row, and with no other lease statement: acquire (of a
// new, a released or a held lease), renew, fenced write, or the clearing of
// liveness records at Close.
func TestReleasedTermsCount(t *testing.T) {
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
