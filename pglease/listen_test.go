package pglease

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// wakeBound is how soon a watcher must wake after a release. The goal is a
// few milliseconds; the bound leaves room for a loaded CI machine.
const wakeBound = 2 * time.Second

// TestWatchReleaseLocal proves that a release through the same Store wakes
// its watchers directly, with no listener at all.
func TestWatchReleaseLocal(t *testing.T) {
	s := openStore(t, WithSchema(freshSchema(t)), WithoutListener())
	ch, stop := s.WatchRelease("local")
	defer stop()
	l, err := s.TryAcquire(testCtx(t), "local", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, s.Release(testCtx(t), l))
	assert.True(t, woken(ch, wakeBound), "the release must wake the watcher")
	s.mu.Lock()
	assert.Nil(t, s.listener, "WithoutListener must not start a listener")
	s.mu.Unlock()

	require.NoError(t, s.Release(testCtx(t), l))
	assert.False(t, woken(ch, 50*time.Millisecond), "a release that frees nothing wakes nobody")
	stop()
	stop() // stop is idempotent
	s.mu.Lock()
	assert.Empty(t, s.watchers, "stop must unregister the watcher")
	s.mu.Unlock()
}

// TestWatchReleaseAcrossStores proves that a release through another Store
// (another process) wakes a watcher through NOTIFY, and that a lease of
// another name does not count as that release.
func TestWatchReleaseAcrossStores(t *testing.T) {
	schema := freshSchema(t)
	a := openStore(t, WithSchema(schema))
	b := openStore(t, WithSchema(schema))
	ch, stop := a.WatchRelease("watched")
	defer stop()
	waitListening(t, a, 1)
	drain(ch)

	other, err := b.TryAcquire(testCtx(t), "other", "x", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, b.Release(testCtx(t), other))
	assert.False(t, woken(ch, 200*time.Millisecond), "the release of another lease must not wake this watcher")
	l, err := b.TryAcquire(testCtx(t), "watched", "x", time.Minute, elector.Lease{})
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, b.Release(testCtx(t), l))
	require.True(t, woken(ch, wakeBound), "a release through another store must wake the watcher within %v", wakeBound)
	t.Logf("cross-store wake after %v", time.Since(start))
}

// TestHandoffAcrossStores proves the goal of the listener: when a leader on
// one Store resigns, a candidate on another Store that found the lease held
// takes over within a bound far below its RetryInterval (5s) and TTL (3s),
// round after round. Each candidate starts as the last round ends, so the
// NOTIFY of the last release may wake it once more for nothing; that must
// not cost it the next one.
func TestHandoffAcrossStores(t *testing.T) {
	const (
		rounds = 6
		bound  = time.Second
	)
	schema := freshSchema(t)
	stores := [2]*Store{openStore(t, WithSchema(schema)), openStore(t, WithSchema(schema))}
	cfg := elector.Config{TTL: 3 * time.Second, RetryInterval: 5 * time.Second}
	var (
		electors [2]*elector.LeaseElector
		waiting  [2]heldObserver
	)
	for i, s := range stores {
		c := cfg
		c.Holder = unique("handoff-")
		waiting[i] = make(heldObserver, 1)
		c.Observer = waiting[i]
		e, err := elector.New(s, "handoff", c)
		require.NoError(t, err)
		electors[i] = e
	}
	term, err := electors[0].Campaign(testCtx(t))
	require.NoError(t, err)
	var took []time.Duration
	for round := range rounds {
		next := electors[(round+1)%2]
		nextStore := stores[(round+1)%2]
		held := waiting[(round+1)%2]
		drainHeld(held)
		type result struct {
			term elector.Term
			err  error
		}
		got := make(chan result, 1)
		ctx, cancel := context.WithTimeout(testCtx(t), 30*time.Second)
		go func() {
			tm, err := next.Campaign(ctx)
			got <- result{tm, err}
		}()
		waitListening(t, nextStore, 1)
		select { // the candidate waits: it found the lease held
		case <-held:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the candidate did not find the lease held within 10s", round)
		}
		require.NoError(t, term.Resign(testCtx(t)))
		start := time.Now()
		r := <-got
		elapsed := time.Since(start)
		cancel()
		require.NoError(t, r.err, "round %d", round)
		took = append(took, elapsed)
		assert.Less(t, elapsed, bound, "round %d: handoff took %v, RetryInterval is %v", round, elapsed, cfg.RetryInterval)
		term = r.term
	}
	require.NoError(t, term.Resign(testCtx(t)))
	slices.Sort(took)
	t.Logf("handoff times %v, median %v", took, took[len(took)/2])
}

// heldObserver receives a value, without blocking, when its elector's
// campaign finds the lease held.
type heldObserver chan struct{}

func (o heldObserver) Observe(ev elector.Event) {
	if ev.Kind == elector.EventCampaign && ev.Result == elector.ResultHeld {
		select {
		case o <- struct{}{}:
		default:
		}
	}
}

// drainHeld empties o.
func drainHeld(o heldObserver) {
	for {
		select {
		case <-o:
		default:
			return
		}
	}
}

// TestCloseStopsListener proves that Close stops the listener and waits for
// it (goleak in TestMain checks the goroutine), that Close is idempotent,
// and that the store refuses work afterwards.
func TestCloseStopsListener(t *testing.T) {
	s, err := Open(testCtx(t), testDSN(t), WithSchema(freshSchema(t)))
	require.NoError(t, err)
	_, stop := s.WatchRelease("x")
	waitListening(t, s, 1)
	require.NoError(t, s.Close())
	select {
	case <-s.listener.done:
	default:
		t.Fatal("Close returned before the listener exited")
	}
	require.NoError(t, s.Close(), "Close is idempotent")
	stop()
	_, err = s.TryAcquire(testCtx(t), "x", "a", time.Minute, elector.Lease{})
	assert.ErrorIs(t, err, ErrClosed)
	_, err = s.Get(testCtx(t), "x")
	assert.ErrorIs(t, err, ErrClosed)

	before := s.listener
	_, stop = s.WatchRelease("y")
	defer stop()
	assert.Same(t, before, s.listener, "WatchRelease after Close must not start a listener")
}

// TestNewKeepsCallerPool proves that a Store on the caller's pool leaves it
// open on Close.
func TestNewKeepsCallerPool(t *testing.T) {
	schema := freshSchema(t)
	owner := openStore(t, WithSchema(schema))
	s, err := New(testCtx(t), owner.Pool(), WithSchema(schema))
	require.NoError(t, err)
	_, stop := s.WatchRelease("x")
	waitListening(t, s, 1)
	stop()
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
	ch, stop := a.WatchRelease("idle")
	defer stop()
	waitListening(t, a, 1)
	drain(ch)
	time.Sleep(200 * time.Millisecond) // several keepalive rounds
	l, err := b.TryAcquire(testCtx(t), "idle", "x", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, b.Release(testCtx(t), l))
	require.True(t, woken(ch, wakeBound), "a release after idle pings must wake the watcher")
	assert.EqualValues(t, 1, a.listener.sessions.Load(), "pings must not cost the connection")
}
