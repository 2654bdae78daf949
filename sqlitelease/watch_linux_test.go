package sqlitelease_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// TestWatchLeaseHolderGone: a Store that watches leases of two holders
// tests each holder's liveness lock once per wake-up of its poller, the
// holders learned from the rows it reads (no TryAcquire needed). When one
// holder dies, the watchers of its lease receive the zero Lease
// (WatchRelease watchers wake) within a few watch intervals, once, and the
// watchers of the other lease nothing; the dead holder is tested no more. A
// TryAcquire then takes the lease over, and its new state follows.
func TestWatchLeaseHolderGone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	w, dying, alive := openPath(t, path), openPath(t, path), openPath(t, path)
	l, err := dying.TryAcquire(bg(t), "job", "dying", 15*time.Second, elector.Lease{})
	require.NoError(t, err)
	o, err := alive.TryAcquire(bg(t), "other-job", "alive", 15*time.Second, elector.Lease{})
	require.NoError(t, err)

	ch, stop := w.WatchLease("job", time.Minute)
	defer stop()
	released, stopReleased := w.WatchRelease("job")
	defer stopReleased()
	other, stopOther := w.WatchLease("other-job", time.Minute)
	defer stopOther()
	requireState(t, ch, l, wakeBound)
	requireState(t, other, o, wakeBound)
	require.Eventually(t, func() bool { return sqlitelease.TestedHolders(w) == 2 }, wakeBound, time.Millisecond,
		"both holders tested")

	start := time.Now()
	require.NoError(t, sqlitelease.Die(dying))
	took := requireState(t, ch, elector.Lease{}, deathBound)
	requireWoken(t, released, deathBound)
	t.Logf("the zero Lease arrived %v after the holder's death", took)
	assert.Less(t, time.Since(start), deathBound)
	assert.Equal(t, 1, sqlitelease.TestedHolders(w), "the dead holder is tested no more")
	polls, tests := sqlitelease.LivenessTests(w)
	requireNoState(t, ch, 50*time.Millisecond) // the zero Lease comes once
	polls2, tests2 := sqlitelease.LivenessTests(w)
	require.Greater(t, polls2, polls)
	assert.Equal(t, polls2-polls, tests2-tests, "the live holder alone tested, once per wake-up")

	next, err := w.TryAcquire(bg(t), "job", "w", 15*time.Second, elector.Lease{})
	require.NoError(t, err, "the holder is gone: taken over at once")
	requireState(t, ch, next, wakeBound)
	requireNoState(t, other, 50*time.Millisecond)
	require.Eventually(t, func() bool { return sqlitelease.TestedHolders(w) == 1 }, wakeBound, time.Millisecond)
}

// TestWatchWakesOnEvents: on Linux a watching Store does not wait for its
// watch interval (an hour here) to learn what another Store did to a
// watched lease: a release, a new term and the death of the new holder
// each reach its watchers at once, woken by the liveness file.
func TestWatchWakesOnEvents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	w := openPath(t, path, sqlitelease.WithWatchInterval(time.Hour))
	a, b := openPath(t, path), openPath(t, path)
	l, err := a.TryAcquire(bg(t), "job", "a", 15*time.Second, elector.Lease{})
	require.NoError(t, err)
	ch, stop := w.WatchLease("job", time.Hour)
	defer stop()
	requireState(t, ch, l, wakeBound) // the first read is at once

	require.NoError(t, a.Release(bg(t), l))
	took := requireState(t, ch, elector.Lease{}, deathBound)
	t.Logf("a release by another Store arrived after %v", took)

	next, err := b.TryAcquire(bg(t), "job", "b", 15*time.Second, elector.Lease{})
	require.NoError(t, err)
	took = requireState(t, ch, next, deathBound)
	t.Logf("a new term by another Store arrived after %v", took)

	require.NoError(t, sqlitelease.Die(b))
	took = requireState(t, ch, elector.Lease{}, deathBound)
	t.Logf("the death of its holder arrived after %v", took)
}
