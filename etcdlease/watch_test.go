package etcdlease

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// wakeBound is how soon a watcher must wake after a release in another
// Store: the watch delivers it in milliseconds.
const wakeBound = 2 * time.Second

// TestReleaseWakesOtherStore proves that a release through one Store wakes
// the watchers of another Store (another client, as in another process),
// and only of the released name.
func TestReleaseWakesOtherStore(t *testing.T) {
	srv := startEtcd(t)
	prefix := uniquePrefix()
	watching, releasing := openStore(t, srv, WithPrefix(prefix)), openStore(t, srv, WithPrefix(prefix))
	ch, stop := watching.WatchRelease("job")
	defer stop()
	other, stopOther := watching.WatchRelease("other-job")
	defer stopOther()
	waitWatching(t, watching, 1)
	drain(ch) // the watch's start pokes every watcher; that wake does not count
	drain(other)

	l, err := releasing.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	_, err = releasing.Renew(testCtx(t), l, time.Minute)
	require.NoError(t, err)
	assert.False(t, woken(ch, 100*time.Millisecond), "an acquire or a renewal is no release")

	start := time.Now()
	require.NoError(t, releasing.Release(testCtx(t), l))
	require.True(t, woken(ch, wakeBound), "a release in another Store must wake the watcher within %v", wakeBound)
	t.Logf("woken %v after the release began", time.Since(start))
	assert.False(t, woken(other, 100*time.Millisecond), "a release must not wake the watchers of another name")
}

// TestDeleteWakesWatcher proves that an operator deleting a lease key (as
// etcdctl del would) wakes its watchers: the lease is free.
func TestDeleteWakesWatcher(t *testing.T) {
	srv := startEtcd(t)
	s := openStore(t, srv, WithPrefix(uniquePrefix()))
	_, err := s.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	ch, stop := s.WatchRelease("job")
	defer stop()
	waitWatching(t, s, 1)
	drain(ch)
	_, err = rawClient(t, srv).Delete(testCtx(t), s.Key("job"))
	require.NoError(t, err)
	assert.True(t, woken(ch, wakeBound), "deleting the key must wake the watcher within %v", wakeBound)
}

// TestOneWatchPerStore proves that watchers of many names share the one
// watch, started by the first WatchRelease, and that stop is idempotent
// and forgets the watcher.
func TestOneWatchPerStore(t *testing.T) {
	srv := startEtcd(t)
	s := openStore(t, srv, WithPrefix(uniquePrefix()))
	assert.Nil(t, s.watch, "no watch before the first WatchRelease")
	var stops []func()
	for _, name := range []string{"a", "b", "c", "a"} {
		_, stop := s.WatchRelease(name)
		stops = append(stops, stop)
	}
	waitWatching(t, s, 1)
	time.Sleep(50 * time.Millisecond)
	assert.EqualValues(t, 1, watchesStarted(s), "one watch for every name")
	for _, stop := range stops {
		stop()
		stop()
	}
	s.mu.Lock()
	assert.Empty(t, s.watchers)
	s.mu.Unlock()
}

// TestCloseStopsWatch proves that Close stops the watch and waits for its
// goroutine (goleak in TestMain checks that nothing is left), and that
// WatchRelease after Close starts nothing.
func TestCloseStopsWatch(t *testing.T) {
	srv := startEtcd(t)
	s, err := Open(testCtx(t), []string{srv.endpoint}, WithPrefix(uniquePrefix()))
	require.NoError(t, err)
	_, stop := s.WatchRelease("job")
	waitWatching(t, s, 1)
	w := s.watch
	require.NoError(t, s.Close())
	select {
	case <-w.done:
	default:
		t.Fatal("Close returned before the watch goroutine did")
	}
	stop()
	ch, stop := s.WatchRelease("job")
	stop()
	assert.NotNil(t, ch)
	assert.Same(t, w, s.watch, "WatchRelease after Close must not start another watch")
	require.NoError(t, s.Close(), "Close is idempotent")
}

// TestWatchSurvivesConnectionLoss proves that the watch outlives the loss
// of its connection (a network failure, a member restart): after the
// connection is cut, a release in another Store still wakes the watcher.
func TestWatchSurvivesConnectionLoss(t *testing.T) {
	srv := startEtcd(t)
	p := startProxy(t, srv)
	prefix := uniquePrefix()
	watching, err := Open(testCtx(t), []string{p.endpoint}, WithPrefix(prefix))
	require.NoError(t, err)
	defer func() { require.NoError(t, watching.Close()) }()
	releasing := openStore(t, srv, WithPrefix(prefix))
	ch, stop := watching.WatchRelease("job")
	defer stop()
	waitWatching(t, watching, 1)

	p.cut()
	// The client reconnects and resumes the watch from where it was, or
	// the watch fails and is created again (a poke). Wait for the client
	// to be back, then drain what came before the release.
	_, err = watching.Get(testCtx(t), "job")
	require.ErrorIs(t, err, elector.ErrNoLease)
	drain(ch)
	l, err := releasing.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, releasing.Release(testCtx(t), l))
	assert.True(t, woken(ch, 5*time.Second), "a release after the connection loss must wake the watcher")
}
