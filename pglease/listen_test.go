package pglease

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// wakeBound is how soon a release must be reported. The goal is a few
// milliseconds; the bound leaves room for a loaded CI machine.
const wakeBound = 2 * time.Second

// TestNotifyLocalRelease proves that a release through the same Store is
// reported at once as the lease's new state, with no listener at all; that
// a release that frees nothing reports nothing; and that nothing is
// reported after stop.
func TestNotifyLocalRelease(t *testing.T) {
	s := openStore(t, WithSchema(freshSchema(t)), WithoutListener())
	n := make(notified, 10)
	stop := s.Notify(func(c elector.Change) { n <- c })
	l, err := s.TryAcquire(testCtx(t), "local", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, s.Release(testCtx(t), l))
	require.Len(t, n, 1, "Release reports before it returns")
	assert.Equal(t, freed("local"), <-n)
	assert.False(t, s.changes.Running(), "WithoutListener must not start a listener")

	require.NoError(t, s.Release(testCtx(t), l))
	assert.Empty(t, n, "a release that frees nothing reports nothing")
	stop()
	stop() // stop is idempotent
	l, err = s.TryAcquire(testCtx(t), "local", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, s.Release(testCtx(t), l))
	assert.Empty(t, n, "nothing is reported after stop")
}

// TestNotifyAcrossStores proves that a release through another Store (another
// process) is reported through NOTIFY, round after round, each as the
// release of its own lease, within wakeBound.
func TestNotifyAcrossStores(t *testing.T) {
	schema := freshSchema(t)
	a := openStore(t, WithSchema(schema))
	b := openStore(t, WithSchema(schema))
	n := notifyOf(t, a)
	n.listening(t)

	var took []time.Duration
	for round := range 5 {
		other, err := b.TryAcquire(testCtx(t), "other", "x", time.Minute, elector.Lease{})
		require.NoError(t, err)
		l, err := b.TryAcquire(testCtx(t), "watched", "x", time.Minute, elector.Lease{})
		require.NoError(t, err)
		require.NoError(t, b.Release(testCtx(t), other))
		start := time.Now()
		require.NoError(t, b.Release(testCtx(t), l))
		var seen []elector.Change
		require.True(t, n.await(wakeBound, func(c elector.Change) bool {
			if c.Known { // not a reconnect's reread
				seen = append(seen, c)
			}
			return c.Name == "watched"
		}), "round %d: a release through another store must be reported within %v", round, wakeBound)
		took = append(took, time.Since(start))
		assert.Equal(t, []elector.Change{freed("other"), freed("watched")}, seen, "round %d", round)
	}
	slices.Sort(took)
	t.Logf("cross-store release reported after %v (median %v)", took, took[len(took)/2])
}

// TestListenerLifetime proves that the listener starts with the first
// Notify and stops at the last stop (goleak in TestMain checks that it was
// waited for), and starts again with the next Notify.
func TestListenerLifetime(t *testing.T) {
	s := openStore(t, WithSchema(freshSchema(t)))
	require.False(t, s.changes.Running(), "no listener before the first Notify")
	stopA := s.Notify(func(elector.Change) {})
	require.True(t, s.changes.Running())
	stopB := s.Notify(func(elector.Change) {})
	stopA()
	assert.True(t, s.changes.Running(), "it runs while a subscriber is left")
	stopB()
	assert.False(t, s.changes.Running())
	n := notifyOf(t, s)
	n.listening(t)
}

// TestCloseStopsListener proves that Close stops the listener and waits for
// it, that Close is idempotent, and that the store refuses work and starts
// no listener afterwards.
func TestCloseStopsListener(t *testing.T) {
	s, err := Open(testCtx(t), testDSN(t), WithSchema(freshSchema(t)))
	require.NoError(t, err)
	n := notifyOf(t, s)
	n.listening(t)
	require.NoError(t, s.Close())
	assert.False(t, s.changes.Running(), "Close returned with the listener running")
	require.NoError(t, s.Close(), "Close is idempotent")
	_, err = s.TryAcquire(testCtx(t), "x", "a", time.Minute, elector.Lease{})
	assert.ErrorIs(t, err, ErrClosed)
	_, err = s.Get(testCtx(t), "x")
	assert.ErrorIs(t, err, ErrClosed)
	_, err = s.GetMany(testCtx(t), []string{"x"})
	assert.ErrorIs(t, err, ErrClosed)

	stop := s.Notify(func(elector.Change) { t.Error("a callback after Close") })
	defer stop()
	assert.False(t, s.changes.Running(), "Notify after Close must not start a listener")
}

// TestNewKeepsCallerPool proves that a Store on the caller's pool leaves it
// open on Close.
func TestNewKeepsCallerPool(t *testing.T) {
	schema := freshSchema(t)
	owner := openStore(t, WithSchema(schema))
	s, err := New(testCtx(t), owner.Pool(), WithSchema(schema))
	require.NoError(t, err)
	notifyOf(t, s).listening(t)
	require.NoError(t, s.Close())
	require.NoError(t, owner.Pool().Ping(testCtx(t)), "Close must not close a pool given to New")
	_, err = owner.TryAcquire(testCtx(t), "x", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
}

// TestListenerKeepAlive proves that the listener's idle pings (every 30s in
// production, every 20ms here) keep the connection and do not lose
// notifications.
func TestListenerKeepAlive(t *testing.T) {
	schema := freshSchema(t)
	a := openStore(t, WithSchema(schema))
	a.listenKeepAlive = 20 * time.Millisecond
	b := openStore(t, WithSchema(schema))
	n := notifyOf(t, a)
	n.listening(t)
	time.Sleep(200 * time.Millisecond) // several keepalive rounds
	l, err := b.TryAcquire(testCtx(t), "idle", "x", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, b.Release(testCtx(t), l))
	var reconnected bool
	require.True(t, n.await(wakeBound, func(c elector.Change) bool {
		reconnected = reconnected || isReread(c)
		return isFreed("idle")(c)
	}), "a release after idle pings must be reported")
	assert.False(t, reconnected, "pings must not cost the connection")
}
