package pglease

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/counting"
	"github.com/leaderaware/leaderaware/internal/tcpproxy"
)

// countingStore counts TryAcquire calls and keeps the Store's WatchLease
// visible to the elector.
type countingStore = counting.Store[*Store]

// expectState waits up to d for states to deliver want (same Token and
// Version; the zero Lease for free), skipping older states.
func expectState(t *testing.T, states <-chan elector.Lease, want elector.Lease, d time.Duration, what string) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		select {
		case got := <-states:
			if got.Token == want.Token && got.Version == want.Version {
				return
			}
		case <-deadline.C:
			t.Fatalf("%s: the watcher did not deliver token %d version %d within %v", what, want.Token, want.Version, d)
		}
	}
}

// TestWatchLeaseCandidatesMakeNoCalls proves what the lease watcher is for:
// 100 candidates waiting on one Store make no TryAcquire of their own while
// the holders (on another Store, another process) renew, and the Store reads
// all 100 leases in one statement per poll; a released lease is taken over
// in milliseconds, far below a poll; and a lease whose holder stopped
// renewing is taken over within TTL + a poll + a margin of the last renewal,
// with one TryAcquire per candidate.
func TestWatchLeaseCandidatesMakeNoCalls(t *testing.T) {
	const (
		n     = 100
		ttl   = 3 * time.Second
		renew = time.Second
		retry = 500 * time.Millisecond

		holderStores = 5
	)
	schema := freshSchema(t)
	cs := &countingStore{S: openStore(t, WithSchema(schema))}
	name := func(i int) string { return fmt.Sprintf("many/%d", i) }

	// The holders renew on several Stores (two connections each), their
	// terms started spread over a RenewInterval, so that their renewals do
	// not queue for a connection past their deadline on a loaded machine.
	var holders []*Store
	for range holderStores {
		holders = append(holders, openStore(t, WithSchema(schema)))
	}
	terms := make([]elector.Term, n)
	for i := range n {
		e, err := elector.New(holders[i%holderStores], name(i), elector.Config{TTL: ttl, RenewInterval: renew, Holder: "holder"})
		require.NoError(t, err)
		terms[i], err = e.Campaign(testCtx(t))
		require.NoError(t, err)
		time.Sleep(renew / n)
	}
	t.Cleanup(func() {
		for _, tm := range terms {
			_ = tm.Resign(context.Background())
		}
	})

	type won struct {
		i    int
		at   time.Time
		term elector.Term
		err  error
	}
	results := make(chan won, n)
	ctx, cancel := context.WithCancel(testCtx(t))
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i := range n {
		e, err := elector.New(cs, name(i), elector.Config{TTL: ttl, RenewInterval: renew, RetryInterval: retry, Holder: "candidate"})
		require.NoError(t, err)
		wg.Go(func() {
			tm, err := e.Campaign(ctx)
			results <- won{i, time.Now(), tm, err}
		})
	}
	next := func(what string) won {
		t.Helper()
		select {
		case r := <-results:
			require.NoError(t, r.err, "%s: candidate %d", what, r.i)
			t.Cleanup(func() { _ = r.term.Resign(context.Background()) })
			return r
		case <-time.After(2*ttl + retry + 5*time.Second):
			t.Fatalf("%s: no candidate took over", what)
			return won{}
		}
	}

	waitFor(t, 10*time.Second, "every candidate's first TryAcquire", func() bool { return cs.Acquires.Load() >= n })
	reads0 := cs.S.leaseWatch.reads.Load()
	time.Sleep(ttl + renew) // long enough for any watch that saw no renewal to complete
	assert.EqualValues(t, n, cs.Acquires.Load(), "waiting candidates must make no TryAcquire while the holders renew")
	reads := cs.S.leaseWatch.reads.Load() - reads0
	t.Logf("%d batched reads for %d candidates in %v", reads, n, ttl+renew)
	assert.LessOrEqual(t, reads, int64((ttl+renew)/(retry/2))+2, "one read per poll for all candidates")
	assert.GreaterOrEqual(t, reads, int64(2), "the watcher must poll")
	select {
	case r := <-results:
		t.Fatalf("candidate %d returned while its holder renewed: %v", r.i, r.err)
	default:
	}

	// Releases: candidate i takes over lease i as soon as its holder resigns.
	var handoffs []time.Duration
	for i := range n / 2 {
		start := time.Now()
		require.NoError(t, terms[i].Resign(testCtx(t)))
		r := next("release")
		require.Equal(t, i, r.i, "only the released lease may change hands; the holder of lease %d: %v", r.i, terms[r.i].Err())
		handoffs = append(handoffs, r.at.Sub(start))
	}
	slices.Sort(handoffs)
	t.Logf("handoff after release: median %v, max %v", handoffs[len(handoffs)/2], handoffs[len(handoffs)-1])
	assert.Less(t, handoffs[len(handoffs)/2], retry/5, "a release must wake its candidate at once, not at the next poll")
	assert.Less(t, handoffs[len(handoffs)-1], wakeBound)
	assert.EqualValues(t, n+n/2, cs.Acquires.Load(), "one TryAcquire per released lease")

	// Crashes: the other holders stop renewing. Each candidate takes over
	// once it has seen the last version for TTL; it saw it within a poll of
	// the write, so within TTL + retry (+ margin) of the abandon, and never
	// before TTL after the last renewal (at most renew before the abandon).
	abandoned := time.Now()
	for i := n / 2; i < n; i++ {
		terms[i].Abandon()
	}
	var failovers []time.Duration
	for range n - n/2 {
		r := next("abandon")
		require.GreaterOrEqual(t, r.i, n/2)
		failovers = append(failovers, r.at.Sub(abandoned))
	}
	slices.Sort(failovers)
	t.Logf("takeover after the holder stopped renewing: min %v, median %v, max %v",
		failovers[0], failovers[len(failovers)/2], failovers[len(failovers)-1])
	assert.Greater(t, failovers[0], ttl-renew, "no takeover before TTL after the last renewal")
	assert.Less(t, failovers[len(failovers)-1], ttl+retry+time.Second, "takeover within TTL + a poll + margin")
	// A renewal in flight when its holder abandoned may still commit after
	// the candidate read the lease: that candidate's compare-and-set then
	// fails and it watches once more. Allow a few of those, no polling.
	acquires := cs.Acquires.Load()
	assert.GreaterOrEqual(t, acquires, int64(2*n))
	assert.LessOrEqual(t, acquires, int64(2*n+n/10), "one TryAcquire per takeover: candidates wake when their watch completes")
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
	expectState(t, states, l, 10*time.Second, "after the listener connected")
	start := time.Now()
	require.NoError(t, a.Release(testCtx(t), l))
	expectState(t, states, elector.Lease{}, wakeBound, "after a release through another Store")
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
	expectState(t, states, elector.Lease{}, wakeBound, "after a release through this Store")
	s.mu.Lock()
	assert.Nil(t, s.listener, "WithoutListener must not start a listener")
	s.mu.Unlock()
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
	expectState(t, slow, l, 2*time.Second, "first state, at the fast watcher's interval")
	r, err := a.Renew(testCtx(t), l, time.Minute)
	require.NoError(t, err)
	expectState(t, slow, r, 2*time.Second, "renewal, at the fast watcher's interval")
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
			expectState(t, states, l, 5*time.Second, "before the fault")

			if fault == "cut" {
				px.Cut()
			} else {
				px.Freeze()
			}
			r, err := writer.Renew(testCtx(t), l, time.Minute)
			require.NoError(t, err)
			start := time.Now()
			expectState(t, states, r, 10*time.Second, "after the fault")
			t.Logf("renewal delivered %v after the %s", time.Since(start), fault)
			require.NoError(t, writer.Release(testCtx(t), r))
			expectState(t, states, elector.Lease{}, 10*time.Second, "release after the fault")
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
