package mysqllease

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/counting"
	"github.com/leaderaware/leaderaware/internal/testing/watchtest"
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
	l, err := s.TryAcquire(ctx, "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	released, stop := s.WatchRelease("job")
	defer stop()
	states, stopStates := s.WatchLease("job", time.Minute)
	defer stopStates()
	watchtest.ExpectState(t, states, l, 5*time.Second, "held")
	assert.False(t, woken(released, 100*time.Millisecond))
	_, err = rawDB(t).ExecContext(ctx, "DELETE FROM "+s.Table())
	require.NoError(t, err)
	assert.True(t, woken(released, 5*time.Second))
	watchtest.ExpectState(t, states, elector.Lease{}, 5*time.Second, "row deleted")
}

// TestWatchReleaseFreeAtStart: a watcher of a lease that is free when the
// watch starts (never written here) is woken by the first poll.
func TestWatchReleaseFreeAtStart(t *testing.T) {
	s := openStore(t, "", WithPollInterval(time.Minute))
	released, stop := s.WatchRelease("never")
	defer stop()
	assert.True(t, woken(released, 5*time.Second))
	assert.False(t, woken(released, 100*time.Millisecond), "once")
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
	assert.False(t, woken(chA2, 100*time.Millisecond), "the poll after a local release must not wake the watcher again")
	assert.Equal(t, []string{"a", "b"}, watchedNames(s))
	stopA2()
	assert.Equal(t, []string{"b"}, watchedNames(s))
}

func watchedNames(s *Store) []string {
	s.watch.mu.Lock()
	defer s.watch.mu.Unlock()
	names := make([]string, 0, len(s.watch.byName))
	for name := range s.watch.byName {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// expectNothing fails t if states delivers within d.
func expectNothing(t *testing.T, states <-chan elector.Lease, d time.Duration, what string) {
	t.Helper()
	select {
	case got := <-states:
		t.Fatalf("%s: the watcher delivered %+v", what, got)
	case <-time.After(d):
	}
}

// TestWatchLeaseFirstState proves that the first state of a lease, held or
// free, comes at once after WatchLease, not after a poll interval (a
// minute here), also for a second watcher of the same name.
func TestWatchLeaseFirstState(t *testing.T) {
	s := openStore(t, "", WithPollInterval(time.Minute))
	l, err := s.TryAcquire(testCtx(t), "held", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	for i := range 2 {
		start := time.Now()
		held, stopHeld := s.WatchLease("held", time.Minute)
		defer stopHeld()
		watchtest.ExpectState(t, held, l, 5*time.Second, fmt.Sprintf("watcher %d of a held lease", i))
		free, stopFree := s.WatchLease("free", time.Minute)
		defer stopFree()
		watchtest.ExpectState(t, free, elector.Lease{}, 5*time.Second, fmt.Sprintf("watcher %d of a free lease", i))
		t.Logf("watcher %d: first states after %v", i, time.Since(start))
	}
}

// TestWatchLeaseChanges proves that renewals (new versions) and a takeover
// (a new holder and token) through another Store are delivered within
// about a poll interval, that a release through another Store is delivered
// as the zero Lease within a poll interval even when the watcher asked for
// a minute, and that an unchanged lease is not delivered again.
func TestWatchLeaseChanges(t *testing.T) {
	const interval = 100 * time.Millisecond
	const bound = interval + 400*time.Millisecond // a poll, the read and a loaded machine
	s := openStore(t, "", WithPollInterval(interval))
	other := openStore(t, s.opts.table)
	ctx := testCtx(t)
	l, err := other.TryAcquire(ctx, "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	states, stop := s.WatchLease("job", time.Minute)
	defer stop()
	watchtest.ExpectState(t, states, l, 5*time.Second, "first state")

	for i := range 3 {
		l, err = other.Renew(ctx, l, time.Duration(i+2)*time.Minute)
		require.NoError(t, err)
		start := time.Now()
		watchtest.ExpectState(t, states, l, bound, fmt.Sprintf("renewal %d", i))
		t.Logf("renewal %d delivered after %v", i, time.Since(start))
	}
	expectNothing(t, states, 3*interval, "an unchanged lease")

	taken, err := other.TryAcquire(ctx, "job", "b", time.Minute, l) // observed for its TTL
	require.NoError(t, err)
	require.NotEqual(t, l.Token, taken.Token)
	watchtest.ExpectState(t, states, taken, bound, "takeover")

	start := time.Now()
	require.NoError(t, other.Release(ctx, taken))
	watchtest.ExpectState(t, states, elector.Lease{}, bound, "release through another Store")
	t.Logf("release delivered after %v", time.Since(start))
	expectNothing(t, states, 3*interval, "a lease that stays released")

	// Acquired and released again between two polls: a new free state.
	again, err := other.TryAcquire(ctx, "job", "c", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, other.Release(ctx, again))
	watchtest.ExpectState(t, states, elector.Lease{}, bound, "the next release")
}

// TestWatchLeaseLocalRelease proves that a release through the same Store
// reaches its watchers at once, long before a poll (a minute here), and
// that the poll that reads the released row does not deliver it again.
func TestWatchLeaseLocalRelease(t *testing.T) {
	s := openStore(t, "", WithPollInterval(time.Minute))
	l, err := s.TryAcquire(testCtx(t), "local", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	states, stop := s.WatchLease("local", time.Minute)
	defer stop()
	watchtest.ExpectState(t, states, l, 5*time.Second, "first state")
	start := time.Now()
	require.NoError(t, s.Release(testCtx(t), l))
	select {
	case got := <-states:
		assert.Equal(t, elector.Lease{}, got)
	default:
		t.Fatal("a release through this Store must be delivered before Release returns")
	}
	t.Logf("delivered %v after Release began", time.Since(start))
	statements := s.watch.statements.Load()
	_, stopOther := s.WatchLease("other", time.Minute) // a poll now
	defer stopOther()
	waitFor(t, 5*time.Second, "a poll", func() bool { return s.watch.statements.Load() > statements })
	expectNothing(t, states, 200*time.Millisecond, "the released state read back")
}

// TestWatchLeaseOneStatementPerPoll proves that the Store reads 1,000
// watched names with one statement per 500 names per poll, whatever the
// number of watchers, and delivers each its own state.
func TestWatchLeaseOneStatementPerPoll(t *testing.T) {
	const (
		n        = 1000
		interval = 100 * time.Millisecond
		window   = time.Second
	)
	s := openStore(t, "", WithPollInterval(interval))
	name := func(i int) string { return fmt.Sprintf("many/%d", i) }
	held := make([]elector.Lease, n)
	for i := 0; i < n; i += 2 { // the even ones are held, the odd ones free
		var err error
		held[i], err = s.TryAcquire(testCtx(t), name(i), "a", time.Minute, elector.Lease{})
		require.NoError(t, err)
	}
	states := make([]<-chan elector.Lease, n)
	for i := range n {
		ch, stop := s.WatchLease(name(i), time.Minute)
		defer stop()
		states[i] = ch
	}
	for i := range n {
		watchtest.ExpectState(t, states[i], held[i], 10*time.Second, name(i))
	}
	before := s.watch.statements.Load()
	time.Sleep(window)
	statements := s.watch.statements.Load() - before
	polls := float64(window) / float64(interval)
	t.Logf("%d statements in %v for %d names (%.0f to %.0f polls)", statements, window, n, polls, 2*polls)
	assert.LessOrEqual(t, statements, int64(2*(2*polls+2)), "two statements per poll for 1,000 names")
	assert.GreaterOrEqual(t, statements, int64(2*(polls/2)), "the watcher must poll every interval at most")
	for i := range n {
		expectNothing(t, states[i], 0, "unchanged "+name(i))
	}
}

// TestWatchLeaseNotStarvedByJobs: jobs holding every connection of
// Store.DB do not hold up the watcher's reads.
func TestWatchLeaseNotStarvedByJobs(t *testing.T) {
	s := openStore(t, "", WithPollInterval(time.Minute))
	s.DB().SetMaxOpenConns(2)
	holdAll(t, s.DB(), 2)
	states, stop := s.WatchLease("job", time.Minute)
	defer stop()
	watchtest.ExpectState(t, states, elector.Lease{}, 2*time.Second, "first state while the jobs hold every connection")
}

// TestWatchLeaseSmallestEvery proves that the watcher polls at the smallest
// `every` of its watchers when it is shorter than the poll interval.
func TestWatchLeaseSmallestEvery(t *testing.T) {
	s := openStore(t, "", WithPollInterval(time.Minute))
	other := openStore(t, s.opts.table)
	l, err := other.TryAcquire(testCtx(t), "slow", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	slow, stopSlow := s.WatchLease("slow", time.Minute)
	defer stopSlow()
	watchtest.ExpectState(t, slow, l, 5*time.Second, "first state")
	_, stopFast := s.WatchLease("fast", 100*time.Millisecond)
	defer stopFast()
	l, err = other.Renew(testCtx(t), l, time.Minute)
	require.NoError(t, err)
	watchtest.ExpectState(t, slow, l, 2*time.Second, "renewal, at the fast watcher's interval")
}

// TestWatchLeaseGoroutine proves that the poller starts with the first
// watcher and ends with the last, that stopped watchers receive nothing,
// and that Close stops the poller and waits, after which nothing is
// received and WatchLease starts nothing. goleak in TestMain checks that
// nothing is left behind.
func TestWatchLeaseGoroutine(t *testing.T) {
	s, err := Open(testCtx(t), testDSN(t), WithTable(freshTable(t)), WithPollInterval(20*time.Millisecond))
	require.NoError(t, err)
	defer s.Close()
	w := &s.watch
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
	ctx := testCtx(t)
	l, err := s.TryAcquire(ctx, "a", "x", time.Minute, elector.Lease{})
	require.NoError(t, err)

	assert.False(t, running(), "no goroutine before the first watcher")
	a, stopA := s.WatchLease("a", time.Second)
	a2, stopA2 := s.WatchLease("a", time.Second)
	_, stopB := s.WatchRelease("b")
	assert.True(t, running())
	watchtest.ExpectState(t, a, l, 5*time.Second, "first state")
	watchtest.ExpectState(t, a2, l, 5*time.Second, "first state of the second watcher")
	stopA()
	stopA() // idempotent: must not remove the other watcher of "a"
	stopB()
	assert.True(t, running(), "a watcher of a remains")
	l, err = s.Renew(ctx, l, time.Minute)
	require.NoError(t, err)
	watchtest.ExpectState(t, a2, l, 5*time.Second, "renewal, to the watcher left")
	expectNothing(t, a, 0, "a stopped watcher")
	stopA2()
	assert.False(t, running(), "the last stop ends the goroutine")
	assert.True(t, ended(), "the goroutine must exit after the last stop")
	require.NoError(t, s.Release(ctx, l))
	expectNothing(t, a2, 100*time.Millisecond, "a stopped watcher, after a release")

	c, stopC := s.WatchLease("c", time.Millisecond)
	defer stopC()
	watchtest.ExpectState(t, c, elector.Lease{}, 5*time.Second, "a new watcher starts it again")
	assert.True(t, running())
	_, err = s.TryAcquire(ctx, "c", "x", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	assert.False(t, running())
	assert.True(t, ended(), "Close must wait for the goroutine")
	select {
	case got := <-c:
		// A state the poller delivered before Close; nothing after it.
		t.Logf("delivered before Close: %+v", got)
	default:
	}
	expectNothing(t, c, 100*time.Millisecond, "a watcher after Close")
	d, stopD := s.WatchLease("d", time.Millisecond)
	defer stopD()
	assert.False(t, running(), "WatchLease after Close must start nothing")
	expectNothing(t, d, 100*time.Millisecond, "a watcher that came after Close")
}

// TestJitter proves that poll intervals fall in [d/2, d] and vary, so that
// polls keep no fixed phase against a holder's renewals.
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

// waitFor polls cond every 10ms until it holds, or fails t after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWatchLeaseCandidatesMakeNoCalls: 100 candidates waiting on one Store
// make no TryAcquire of their own while the holders (on other Stores)
// renew, and the Store reads all 100 leases in one statement per poll; a
// lease released elsewhere is taken over within a poll interval (250ms),
// well below the candidates' RetryInterval; a lease whose holder stopped
// renewing, within TTL + a poll + a margin of its last write, which may be
// a renewal in flight at the abandon that commits up to a RenewInterval
// later.
func TestWatchLeaseCandidatesMakeNoCalls(t *testing.T) {
	table := freshTable(t)
	c := watchtest.Case[*Store]{
		Candidates: &counting.Store[*Store]{S: openStore(t, table)},
		TTL:        3 * time.Second, Renew: time.Second, Retry: 2 * time.Second,
	}
	for range 5 {
		c.Holders = append(c.Holders, openStore(t, table))
	}
	c.Reads = c.Candidates.S.watch.statements.Load
	c.ReadEvery = DefaultPollInterval / 2
	c.HandoffMedian, c.HandoffMax = c.Retry/4, DefaultPollInterval+time.Second
	c.TakeoverMax = c.TTL + c.Renew + DefaultPollInterval + time.Second
	watchtest.CandidatesMakeNoCalls(t, c)
}

// TestDeliverRolledBackStates: a state older than the one a watcher got
// last, as a row rolled back shows, is delivered (a candidate that kept
// the newer one would wait for it forever); the same state is not
// delivered twice.
func TestDeliverRolledBackStates(t *testing.T) {
	sub := &watchSub{states: make(chan elector.Lease, 1)}
	for _, st := range []leaseState{{token: 5, version: 3}, {token: 5, version: 1}, {token: 4, version: 7}} {
		sub.deliver(st, elector.Lease{Token: st.token, Version: st.version})
		select {
		case l := <-sub.states:
			assert.Equal(t, st.version, l.Version)
		default:
			t.Fatalf("state %+v was not delivered", st)
		}
	}
	sub.deliver(leaseState{token: 4, version: 7}, elector.Lease{Token: 4, Version: 7})
	assert.Empty(t, sub.states, "the same state again")
}

// TestLateReleaseNotDelivered: a local release that wrote before a poll
// began, but reaches the watcher after that poll delivered, is not
// delivered: the poll's state is newer. A release after the poll is.
func TestLateReleaseNotDelivered(t *testing.T) {
	sub := &watchSub{states: make(chan elector.Lease, 1)}
	w := &watcher{byName: map[string]*watchedName{"job": {subs: map[*watchSub]struct{}{sub: {}}}}}
	wrote := w.mark()                 // the release's write returned
	w.byName["job"].readAt = w.mark() // a poll began, read the next term and delivered it
	sub.deliver(leaseState{token: 6, version: 1}, elector.Lease{Token: 6, Version: 1})
	<-sub.states
	w.released("job", leaseState{token: 5, version: 9, free: true}, wrote)
	assert.Empty(t, sub.states, "a release older than the poll's read was delivered")
	w.released("job", leaseState{token: 6, version: 2, free: true}, w.mark())
	assert.Len(t, sub.states, 1, "a release after the poll's read")
}

// TestWatchNothingAfterClose: a state that a watcher has not received when
// the Store closes is not received afterwards.
func TestWatchNothingAfterClose(t *testing.T) {
	s := openStore(t, "")
	released, stopRelease := s.WatchRelease("job")
	defer stopRelease()
	states, stop := s.WatchLease("job", time.Minute)
	defer stop()
	waitFor(t, 5*time.Second, "the first state", func() bool { return len(states) == 1 && len(released) == 1 })
	require.NoError(t, s.Close())
	assert.Zero(t, len(states)+len(released), "received after Close")
}
