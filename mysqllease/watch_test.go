package mysqllease

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// TestWatchReleaseByOtherStore: a release through another Store (another
// process, as far as the poller knows) wakes the watcher within about one
// poll interval; renewals in between wake nobody.
func TestWatchReleaseByOtherStore(t *testing.T) {
	const interval = 100 * time.Millisecond
	watcher := openStore(t, "", WithPollInterval(interval))
	holder := openStore(t, watcher.opts.table)
	ctx := testCtx(t)
	l, err := holder.TryAcquire(ctx, "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	released, stop := watcher.WatchRelease("job")
	defer stop()
	for range 3 { // held and renewed: no wake-up
		time.Sleep(interval)
		l, err = holder.Renew(ctx, l, time.Minute)
		require.NoError(t, err)
	}
	assert.False(t, woken(released, 2*interval), "a renewal must not wake the watchers")

	for round := range 3 {
		start := time.Now()
		require.NoError(t, holder.Release(ctx, l))
		require.True(t, woken(released, 5*time.Second), "round %d: release by another store did not wake the watcher", round)
		took := time.Since(start)
		t.Logf("round %d: woken %v after the release (poll interval %v)", round, took.Round(time.Millisecond), interval)
		assert.Less(t, took, interval+150*time.Millisecond, "the wake-up must come within about one poll interval")
		l, err = holder.TryAcquire(ctx, "job", "a", time.Minute, elector.Lease{})
		require.NoError(t, err)
		assert.False(t, woken(released, 2*interval), "round %d: the acquire must not wake the watchers", round)
	}
}

// TestWatchRowDeleted: a lease whose row disappears is free too.
func TestWatchRowDeleted(t *testing.T) {
	s := openStore(t, "", WithPollInterval(20*time.Millisecond))
	ctx := testCtx(t)
	_, err := s.TryAcquire(ctx, "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	released, stop := s.WatchRelease("job")
	defer stop()
	assert.False(t, woken(released, 100*time.Millisecond))
	_, err = rawDB(t).ExecContext(ctx, "DELETE FROM "+s.Table())
	require.NoError(t, err)
	assert.True(t, woken(released, 5*time.Second))
}

// TestWatchStop: stopped watchers and other names are not woken, stop is
// idempotent, and a watcher that comes after Close never receives.
func TestWatchStop(t *testing.T) {
	s := openStore(t, "", WithPollInterval(20*time.Millisecond))
	ctx := testCtx(t)
	a, err := s.TryAcquire(ctx, "a", "x", time.Minute, elector.Lease{})
	require.NoError(t, err)
	_, err = s.TryAcquire(ctx, "b", "x", time.Minute, elector.Lease{})
	require.NoError(t, err)
	chA, stopA := s.WatchRelease("a")
	chB, stopB := s.WatchRelease("b")
	chA2, stopA2 := s.WatchRelease("a")
	defer stopB()
	defer stopA2()
	stopA()
	stopA()
	require.NoError(t, s.Release(ctx, a))
	assert.True(t, woken(chA2, time.Second), "the other watcher of a")
	assert.False(t, woken(chA, 100*time.Millisecond), "a stopped watcher")
	assert.False(t, woken(chB, 100*time.Millisecond), "a watcher of another name")
	assert.Equal(t, []string{"a", "b"}, sortedNames(s))
	stopA2()
	assert.Equal(t, []string{"b"}, sortedNames(s))
}

func sortedNames(s *Store) []string {
	names := s.watch.names()
	if len(names) == 2 && names[0] > names[1] {
		names[0], names[1] = names[1], names[0]
	}
	return names
}
