package pglease

import (
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/counting"
	"github.com/leaderaware/leaderaware/internal/testing/tcpproxy"
	"github.com/leaderaware/leaderaware/internal/testing/watchtest"
)

// countingStore counts TryAcquire calls and keeps the Store's WatchLease
// visible to the elector.
type countingStore = counting.Store[*Store]

// TestWatchLeaseCandidatesMakeNoCalls: 100 candidates waiting on one Store
// make no TryAcquire of their own while the holders (on other Stores)
// renew, and the Store reads all 100 leases in one statement per poll; a
// release is taken over in milliseconds (NOTIFY), far below a poll; a lease
// whose holder stopped renewing, within TTL + a poll + a margin.
func TestWatchLeaseCandidatesMakeNoCalls(t *testing.T) {
	schema := freshSchema(t)
	c := watchtest.Case[*Store]{
		Candidates: &countingStore{S: openStore(t, WithSchema(schema))},
		TTL:        3 * time.Second, Renew: time.Second, Retry: 500 * time.Millisecond,
	}
	for range 5 { // two lease connections each
		c.Holders = append(c.Holders, openStore(t, WithSchema(schema)))
	}
	c.Reads = c.Candidates.S.leaseWatch.reads.Load
	c.ReadEvery = c.Retry / 2
	c.HandoffMedian, c.HandoffMax = c.Retry/5, wakeBound
	c.TakeoverMax = c.TTL + c.Retry + time.Second
	watchtest.CandidatesMakeNoCalls(t, c)
}

// TestWatchLeaseHearsRelease proves that a release through another Store is
// delivered as the zero Lease at once through the listener, even when the
// poll interval is a minute.
func TestWatchLeaseHearsRelease(t *testing.T) {
	schema := freshSchema(t)
	a := openStore(t, WithSchema(schema))
	b := openStore(t, WithSchema(schema))
	l, err := a.TryAcquire(testCtx(t), "heard", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	states, stop := b.WatchLease("heard", time.Minute)
	defer stop()
	// The listener's first LISTEN makes the watcher read at once.
	watchtest.ExpectState(t, states, l, 10*time.Second, "after the listener connected")
	start := time.Now()
	require.NoError(t, a.Release(testCtx(t), l))
	watchtest.ExpectState(t, states, elector.Lease{}, wakeBound, "after a release through another Store")
	t.Logf("release delivered after %v", time.Since(start))
}

// TestWatchLeaseLocalRelease proves that a release through the same Store
// reaches its watchers at once, without a listener and long before a poll.
func TestWatchLeaseLocalRelease(t *testing.T) {
	s := openStore(t, WithSchema(freshSchema(t)), WithoutListener())
	l, err := s.TryAcquire(testCtx(t), "local", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	states, stop := s.WatchLease("local", time.Minute)
	defer stop()
	require.NoError(t, s.Release(testCtx(t), l))
	watchtest.ExpectState(t, states, elector.Lease{}, wakeBound, "after a release through this Store")
	s.mu.Lock()
	assert.Nil(t, s.listener, "WithoutListener must not start a listener")
	s.mu.Unlock()
}

// TestWatchLeaseEveryRelease proves that every release reaches a watcher,
// even one that never saw the term it ended: a candidate that got the zero
// Lease and then found the lease taken by its own TryAcquire (after a late
// NOTIFY of an earlier release, or a poll that read the lease free) must
// hear the next release, not wait out the TTL. Each round takes the lease
// and releases it before the watcher reads it; the poll interval is a
// minute, so only the release, or the read it kicks, can deliver.
func TestWatchLeaseEveryRelease(t *testing.T) {
	for _, via := range []string{"this Store", "NOTIFY", "poll"} {
		t.Run(via, func(t *testing.T) {
			schema := freshSchema(t)
			var watcher, writer *Store
			kick := func() {} // what makes the watcher read after a release
			switch via {
			case "this Store":
				watcher = openStore(t, WithSchema(schema), WithoutListener())
				writer = watcher
			case "NOTIFY":
				watcher, writer = openStore(t, WithSchema(schema)), openStore(t, WithSchema(schema))
			case "poll":
				watcher, writer = openStore(t, WithSchema(schema), WithoutListener()), openStore(t, WithSchema(schema))
				kick = watcher.leaseWatch.pokeLocked
			}
			states, stop := watcher.WatchLease("again", time.Minute)
			defer stop()
			watcher.leaseWatch.pokeLocked()
			watchtest.ExpectState(t, states, elector.Lease{}, 10*time.Second, "the first read")
			if via == "NOTIFY" {
				waitListening(t, watcher, 1)
			}
			for round := range 3 {
				l, err := writer.TryAcquire(testCtx(t), "again", "a", time.Minute, elector.Lease{})
				require.NoError(t, err)
				require.NoError(t, writer.Release(testCtx(t), l))
				kick()
				watchtest.ExpectState(t, states, elector.Lease{}, 10*time.Second, fmt.Sprintf("release %d", round))
			}
		})
	}
}

// TestWatchLeaseSmallestEvery proves that the watcher polls at the smallest
// interval any watcher asked for, and delivers only new states.
func TestWatchLeaseSmallestEvery(t *testing.T) {
	schema := freshSchema(t)
	a := openStore(t, WithSchema(schema))
	b := openStore(t, WithSchema(schema), WithoutListener())
	l, err := a.TryAcquire(testCtx(t), "slow", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	slow, stopSlow := b.WatchLease("slow", time.Minute)
	defer stopSlow()
	_, stopFast := b.WatchLease("fast", 100*time.Millisecond)
	defer stopFast()
	watchtest.ExpectState(t, slow, l, 2*time.Second, "first state, at the fast watcher's interval")
	r, err := a.Renew(testCtx(t), l, time.Minute)
	require.NoError(t, err)
	watchtest.ExpectState(t, slow, r, 2*time.Second, "renewal, at the fast watcher's interval")
	reads := b.leaseWatch.reads.Load()
	waitFor(t, 5*time.Second, "more polls", func() bool { return b.leaseWatch.reads.Load() >= reads+3 })
	select {
	case got := <-slow:
		t.Fatalf("an unchanged lease was delivered again: %+v", got)
	default:
	}
}

// TestWatchLeaseGoroutine proves that the watcher's goroutine starts with
// the first watcher and ends with the last, that stop is idempotent, and
// that Close stops it and waits, after which WatchLease starts nothing.
// goleak in TestMain checks that nothing is left behind.
func TestWatchLeaseGoroutine(t *testing.T) {
	s, err := Open(testCtx(t), testDSN(t), WithSchema(freshSchema(t)), WithoutListener())
	require.NoError(t, err)
	w := &s.leaseWatch
	running := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.cancel != nil
	}
	ended := func() bool {
		done := make(chan struct{})
		go func() { w.wg.Wait(); close(done) }()
		select {
		case <-done:
			return true
		case <-time.After(5 * time.Second):
			return false
		}
	}
	assert.False(t, running(), "no goroutine before the first WatchLease")
	_, stopA := s.WatchLease("a", time.Second)
	_, stopA2 := s.WatchLease("a", time.Second)
	_, stopB := s.WatchLease("b", time.Second)
	assert.True(t, running())
	stopA()
	stopA() // idempotent: must not remove the other watcher of "a"
	stopB()
	assert.True(t, running(), "a watcher of a remains")
	stopA2()
	assert.False(t, running(), "the last stop ends the goroutine")
	assert.True(t, ended(), "the goroutine must exit after the last stop")

	_, stopC := s.WatchLease("c", time.Second)
	defer stopC()
	assert.True(t, running(), "a new watcher starts it again")
	require.NoError(t, s.Close())
	assert.False(t, running())
	assert.True(t, ended(), "Close must wait for the goroutine")
	states, stopD := s.WatchLease("d", time.Millisecond)
	defer stopD()
	assert.False(t, running(), "WatchLease after Close must start nothing")
	select {
	case l := <-states:
		t.Fatalf("a watcher after Close received %+v", l)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestWatchLeaseSurvivesDroppedConnection proves that the watcher keeps
// delivering after its connections are cut (a restarted middlebox: the
// client sees them close) or frozen (a dead path: nothing tells the
// client), reading on a fresh connection.
func TestWatchLeaseSurvivesDroppedConnection(t *testing.T) {
	for _, fault := range []string{"cut", "freeze"} {
		t.Run(fault, func(t *testing.T) {
			schema := freshSchema(t)
			writer := openStore(t, WithSchema(schema))
			px, dsn := tcpProxy(t)
			s, err := Open(testCtx(t), dsn, WithSchema(schema))
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, s.Close()) })

			name := "dropped-" + fault
			states, stop := s.WatchLease(name, 100*time.Millisecond)
			defer stop()
			l, err := writer.TryAcquire(testCtx(t), name, "a", time.Minute, elector.Lease{})
			require.NoError(t, err)
			watchtest.ExpectState(t, states, l, 5*time.Second, "before the fault")

			if fault == "cut" {
				px.Cut()
			} else {
				px.Freeze()
			}
			r, err := writer.Renew(testCtx(t), l, time.Minute)
			require.NoError(t, err)
			start := time.Now()
			watchtest.ExpectState(t, states, r, 10*time.Second, "after the fault")
			t.Logf("renewal delivered %v after the %s", time.Since(start), fault)
			require.NoError(t, writer.Release(testCtx(t), r))
			watchtest.ExpectState(t, states, elector.Lease{}, 10*time.Second, "release after the fault")
		})
	}
}

// tcpProxy starts a tcpproxy in front of the test server, closed when t
// ends, and returns it with a DSN that connects through it.
func tcpProxy(t *testing.T) (*tcpproxy.Proxy, string) {
	t.Helper()
	u, err := url.Parse(testDSN(t))
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Hostname() == "" {
		t.Skipf("the proxy tests need %s to be a postgres:// URL with a host", envDSN)
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	px, err := tcpproxy.New(net.JoinHostPort(u.Hostname(), port))
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	u.Host = px.Addr()
	return px, u.String()
}

// TestJitter proves that poll intervals fall in [d/2, d] and vary, so a
// watcher keeps no fixed phase against a holder's renewals.
func TestJitter(t *testing.T) {
	const d = 2 * time.Second
	seen := map[time.Duration]bool{}
	for range 1000 {
		j := jitter(d)
		require.GreaterOrEqual(t, j, d/2)
		require.LessOrEqual(t, j, d)
		seen[j] = true
	}
	assert.Greater(t, len(seen), 900, "intervals must vary")
}
