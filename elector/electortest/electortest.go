// Package electortest checks that an [elector.Store] keeps the lease rules,
// like testing/slogtest does for slog handlers. Every store of this module
// runs it; a store of your own should too:
//
//	func TestStore(t *testing.T) {
//		electortest.TestStore(t, func(t *testing.T) elector.Store {
//			s := mystore.Open(...)
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// The suite never waits for time to pass: stores keep no clock of their own
// (candidates watch leases on theirs), so every rule is a compare-and-set
// that can be checked at once. Its Linearizable subtest runs a few clients
// on one lease at once and checks with porcupine that every operation appears
// to take effect at one instant between its call and its return. Lease names
// are unique per run, so a database that outlives the test does no harm.
package electortest

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

const ttl = time.Minute

var (
	runID = time.Now().UnixNano()
	calls atomic.Int64 // TestStore calls in this process, so names never repeat
)

// TestStore runs the store contract against the stores that newStore returns,
// one new store per subtest.
func TestStore(t *testing.T, newStore func(t *testing.T) elector.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s elector.Store, name string)
	}{
		{"AcquireFree", testAcquireFree},
		{"HeldByOther", testHeldByOther},
		{"HeldBySelf", testHeldBySelf},
		{"NamesAreIndependent", testNamesAreIndependent},
		{"RenewBumpsVersion", testRenewBumpsVersion},
		{"VersionsGrow", testVersionsGrow},
		{"TakeoverNeedsTheObservedVersion", testTakeover},
		{"RenewAfterTakeover", testRenewAfterTakeover},
		{"RenewAfterRelease", testRenewAfterRelease},
		{"ReleaseFrees", testReleaseFrees},
		{"ReleaseStaleChangesNothing", testReleaseStale},
		{"TokensIncrease", testTokensIncrease},
		{"TTLRoundTrips", testTTLRoundTrips},
		{"GetNone", testGetNone},
		{"RaceAcquire", testRaceAcquire},
		{"RaceTakeover", testRaceTakeover},
		{"BadInput", testBadInput},
		{"ReleaseWakesWatcher", testReleaseWakesWatcher},
		{"WatchLeaseSeesEveryState", testWatchLease},
		{"WatchLeaseSeesEveryRelease", testWatchLeaseEveryRelease},
		{"Linearizable", testLinearizable},
	}
	call := calls.Add(1)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, newStore(t), fmt.Sprintf("electortest/%s/%d-%d", tt.name, runID, call))
		})
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// acquire takes the lease, free or observed for its TTL (observed may be
// the zero Lease).
func acquire(t *testing.T, s elector.Store, name, holder string, observed elector.Lease) elector.Lease {
	t.Helper()
	l, err := s.TryAcquire(ctx(t), name, holder, ttl, observed)
	require.NoError(t, err, "TryAcquire(%q, %q, observed %+v)", name, holder, observed)
	return l
}

// held returns the lease a refused TryAcquire reports.
func held(t *testing.T, err error) elector.Lease {
	t.Helper()
	require.ErrorIs(t, err, elector.ErrHeld)
	var he *elector.HeldError
	require.ErrorAs(t, err, &he, "ErrHeld must come as a *elector.HeldError carrying the current lease")
	return he.Lease
}

func testAcquireFree(t *testing.T, s elector.Store, name string) {
	before := time.Now()
	l := acquire(t, s, name, "a", elector.Lease{})
	assert.Equal(t, name, l.Name)
	assert.Equal(t, "a", l.Holder)
	assert.NotZero(t, l.Token, "the first token must be positive")
	assert.NotZero(t, l.Version, "the first version must be positive")
	assert.Equal(t, ttl, l.TTL)
	assert.WithinDuration(t, before, l.Written, time.Hour, "Written must be the writer's clock time")
	got, err := s.Get(ctx(t), name)
	require.NoError(t, err)
	assertSame(t, l, got, "Get after TryAcquire")
}

// assertSame checks that two readings are the same state of a lease.
func assertSame(t *testing.T, want, got elector.Lease, when string) {
	t.Helper()
	assert.Equal(t, want.Holder, got.Holder, "holder, %s", when)
	assert.Equal(t, want.Token, got.Token, "token, %s", when)
	assert.Equal(t, want.Version, got.Version, "version, %s", when)
	assert.Equal(t, want.TTL, got.TTL, "TTL, %s", when)
}

func testHeldByOther(t *testing.T, s elector.Store, name string) {
	l := acquire(t, s, name, "holder-a", elector.Lease{})
	_, err := s.TryAcquire(ctx(t), name, "holder-b", ttl, elector.Lease{})
	assert.Contains(t, err.Error(), "holder-a", "ErrHeld must name the holder")
	assertSame(t, l, held(t, err), "in the HeldError")
	got, err := s.Get(ctx(t), name)
	require.NoError(t, err)
	assertSame(t, l, got, "after a refused TryAcquire")
}

func testHeldBySelf(t *testing.T, s elector.Store, name string) {
	l := acquire(t, s, name, "same", elector.Lease{})
	_, err := s.TryAcquire(ctx(t), name, "same", ttl, elector.Lease{})
	assertSame(t, l, held(t, err), "the holder asking again must watch its old lease like anyone")
	got, err := s.Get(ctx(t), name)
	require.NoError(t, err)
	assertSame(t, l, got, "after a refused TryAcquire")
}

func testNamesAreIndependent(t *testing.T, s elector.Store, name string) {
	acquire(t, s, name+"/1", "a", elector.Lease{})
	l2 := acquire(t, s, name+"/2", "b", elector.Lease{})
	got, err := s.Get(ctx(t), name+"/2")
	require.NoError(t, err)
	assertSame(t, l2, got, "of the second name")
}

func testRenewBumpsVersion(t *testing.T, s elector.Store, name string) {
	l := acquire(t, s, name, "a", elector.Lease{})
	r, err := s.Renew(ctx(t), l, 2*ttl)
	require.NoError(t, err)
	assert.Equal(t, l.Token, r.Token, "renewal keeps the token")
	assert.Equal(t, "a", r.Holder)
	assert.Greater(t, r.Version, l.Version, "renewal must bump the version")
	assert.Equal(t, 2*ttl, r.TTL, "renewal records the new TTL")
	got, err := s.Get(ctx(t), name)
	require.NoError(t, err)
	assertSame(t, r, got, "after Renew")
	// A renewal keyed on an older version of the same term still renews:
	// the version is for candidates, the term is token and holder.
	r2, err := s.Renew(ctx(t), l, ttl)
	require.NoError(t, err)
	assert.Greater(t, r2.Version, r.Version)
}

// testVersionsGrow: every write gives the lease a version above all it had
// (acquire, renewals, a release and the next acquire, a takeover), so that
// a candidate never sees one version twice.
func testVersionsGrow(t *testing.T, s elector.Store, name string) {
	var last uint64
	next := func(l elector.Lease, after string) elector.Lease {
		t.Helper()
		assert.Greater(t, l.Version, last, "the version after %s", after)
		last = l.Version
		return l
	}
	renew := func(l elector.Lease) elector.Lease {
		t.Helper()
		r, err := s.Renew(ctx(t), l, ttl)
		require.NoError(t, err)
		return next(r, "a renewal")
	}
	l := next(acquire(t, s, name, "a", elector.Lease{}), "the first acquire")
	for range 3 {
		l = renew(l)
	}
	require.NoError(t, s.Release(ctx(t), l))
	last++ // the release wrote a version of its own
	l = renew(next(acquire(t, s, name, "b", elector.Lease{}), "a release and an acquire"))
	next(acquire(t, s, name, "c", l), "a takeover")
}

func testTakeover(t *testing.T, s elector.Store, name string) {
	first := acquire(t, s, name, "a", elector.Lease{})
	renewed, err := s.Renew(ctx(t), first, ttl)
	require.NoError(t, err)
	// Observing an older version of the lease is not enough: its holder
	// renewed since.
	_, err = s.TryAcquire(ctx(t), name, "b", ttl, first)
	assertSame(t, renewed, held(t, err), "a takeover with a stale observation")
	got, err := s.Get(ctx(t), name)
	require.NoError(t, err)
	assertSame(t, renewed, got, "after a refused takeover")
	// The version the candidate observed is still current: it takes over.
	next := acquire(t, s, name, "b", renewed)
	assert.Equal(t, "b", next.Holder)
	assert.Greater(t, next.Token, renewed.Token, "a takeover must raise the token")
	assert.Greater(t, next.Version, renewed.Version, "a takeover must raise the version")
	// The same observation cannot be used twice.
	_, err = s.TryAcquire(ctx(t), name, "c", ttl, renewed)
	assertSame(t, next, held(t, err), "a second takeover with the same observation")
}

func testRenewAfterTakeover(t *testing.T, s elector.Store, name string) {
	old := acquire(t, s, name, "a", elector.Lease{})
	cur := acquire(t, s, name, "b", old)
	_, err := s.Renew(ctx(t), old, ttl)
	require.ErrorIs(t, err, elector.ErrLeaseLost)
	// Same holder, earlier token: still stale.
	same := name + "/same-holder"
	first := acquire(t, s, same, "a", elector.Lease{})
	acquire(t, s, same, "a", first)
	_, err = s.Renew(ctx(t), first, ttl)
	require.ErrorIs(t, err, elector.ErrLeaseLost, "a holder's earlier term must not renew its later one")
	got, err := s.Get(ctx(t), name)
	require.NoError(t, err)
	assertSame(t, cur, got, "after a stale renewal")
}

func testRenewAfterRelease(t *testing.T, s elector.Store, name string) {
	l := acquire(t, s, name, "a", elector.Lease{})
	require.NoError(t, s.Release(ctx(t), l))
	_, err := s.Renew(ctx(t), l, ttl)
	require.ErrorIs(t, err, elector.ErrLeaseLost)
	_, err = s.Get(ctx(t), name)
	require.ErrorIs(t, err, elector.ErrNoLease, "a refused renewal must not revive the lease")
}

func testReleaseFrees(t *testing.T, s elector.Store, name string) {
	l := acquire(t, s, name, "a", elector.Lease{})
	require.NoError(t, s.Release(ctx(t), l))
	_, err := s.Get(ctx(t), name)
	require.ErrorIs(t, err, elector.ErrNoLease, "Release must free the lease at once")
	next := acquire(t, s, name, "b", elector.Lease{})
	assert.Greater(t, next.Token, l.Token, "Release must never lower the token")
	assert.Greater(t, next.Version, l.Version)
	require.NoError(t, s.Release(ctx(t), l), "releasing a stale lease returns nil")
	require.NoError(t, s.Release(ctx(t), next))
	require.NoError(t, s.Release(ctx(t), next), "releasing twice returns nil")
	// A free lease is taken whatever the candidate observed.
	again := acquire(t, s, name, "c", l)
	assert.Greater(t, again.Token, next.Token)
}

func testReleaseStale(t *testing.T, s elector.Store, name string) {
	old := acquire(t, s, name, "a", elector.Lease{})
	cur := acquire(t, s, name, "b", old)
	require.NoError(t, s.Release(ctx(t), old))
	got, err := s.Get(ctx(t), name)
	require.NoError(t, err, "releasing a stale lease must not free the current one")
	assertSame(t, cur, got, "after a stale release")
	_, err = s.TryAcquire(ctx(t), name, "c", ttl, elector.Lease{})
	held(t, err)

	// The same holder's earlier term does not free its later one.
	same := name + "/same-holder"
	first := acquire(t, s, same, "a", elector.Lease{})
	second := acquire(t, s, same, "a", first)
	require.NoError(t, s.Release(ctx(t), first))
	got, err = s.Get(ctx(t), same)
	require.NoError(t, err, "releasing a holder's stale term must not free its current one")
	assertSame(t, second, got, "after the holder's stale release")
}

func testTokensIncrease(t *testing.T, s elector.Store, name string) {
	var last uint64
	check := func(l elector.Lease, after string) {
		t.Helper()
		assert.Greater(t, l.Token, last, "token after %s", after)
		last = l.Token
	}
	l := acquire(t, s, name, "a", elector.Lease{})
	check(l, "first acquire")
	require.NoError(t, s.Release(ctx(t), l))
	l = acquire(t, s, name, "a", elector.Lease{})
	check(l, "release (same holder)")
	l = acquire(t, s, name, "b", l)
	check(l, "takeover")
	l = acquire(t, s, name, "b", l)
	check(l, "takeover (same holder)")
	r, err := s.Renew(ctx(t), l, ttl)
	require.NoError(t, err)
	assert.Equal(t, l.Token, r.Token, "renewal keeps the token")
	require.NoError(t, s.Release(ctx(t), r))
	l = acquire(t, s, name, "c", elector.Lease{})
	check(l, "release (other holder)")
}

// testTTLRoundTrips checks that the store keeps the holder's TTL at least
// as long as given (a candidate must never watch for less), up to the
// longest the elector allows, without overflowing.
func testTTLRoundTrips(t *testing.T, s elector.Store, name string) {
	for i, d := range []time.Duration{elector.MaxTTL, 1500*time.Millisecond + time.Nanosecond, time.Nanosecond} {
		n := fmt.Sprintf("%s/%d", name, i)
		l, err := s.TryAcquire(ctx(t), n, "a", d, elector.Lease{})
		require.NoError(t, err, "TryAcquire with TTL %v", d)
		assert.GreaterOrEqual(t, l.TTL, d, "TryAcquire must keep the TTL %v, rounded up if at all", d)
		assert.Less(t, l.TTL-d, time.Second, "TTL %v stored as %v", d, l.TTL)
		got, err := s.Get(ctx(t), n)
		require.NoError(t, err)
		assert.Equal(t, l.TTL, got.TTL, "Get must return the TTL TryAcquire recorded")
		r, err := s.Renew(ctx(t), l, d)
		require.NoError(t, err, "Renew with TTL %v", d)
		assert.GreaterOrEqual(t, r.TTL, d)
	}
}

func testGetNone(t *testing.T, s elector.Store, name string) {
	_, err := s.Get(ctx(t), name)
	require.ErrorIs(t, err, elector.ErrNoLease)
}

// race runs n candidates' TryAcquire at once and checks that exactly one
// won and the others saw ErrHeld.
func race(t *testing.T, s elector.Store, name string, observed elector.Lease) {
	const n = 16
	var (
		wg      sync.WaitGroup
		winners atomic.Int32
		errs    = make([]error, n)
		start   = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = s.TryAcquire(ctx(t), name, fmt.Sprintf("racer-%d", i), ttl, observed)
			if errs[i] == nil {
				winners.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	require.EqualValues(t, 1, winners.Load(), "exactly one of %d racers must win", n)
	for i, err := range errs {
		if err != nil {
			assert.ErrorIs(t, err, elector.ErrHeld, "racer %d must see ErrHeld, not another error", i)
		}
	}
}

func testRaceAcquire(t *testing.T, s elector.Store, name string) {
	race(t, s, name, elector.Lease{})
}

func testRaceTakeover(t *testing.T, s elector.Store, name string) {
	l := acquire(t, s, name, "holder", elector.Lease{})
	race(t, s, name, l)
}

func testBadInput(t *testing.T, s elector.Store, name string) {
	bad := []string{"", "tab\there", "nul\x00", strings.Repeat("x", 256), "\xff\xfe"}
	for _, n := range bad {
		_, err := s.TryAcquire(ctx(t), n, "a", ttl, elector.Lease{})
		require.Error(t, err, "TryAcquire must refuse the lease name %q", n)
		assert.NotErrorIs(t, err, elector.ErrHeld)
		_, err = s.Get(ctx(t), n)
		require.Error(t, err, "Get must refuse the lease name %q", n)
		assert.NotErrorIs(t, err, elector.ErrNoLease, "Get(%q) must report the bad name, not a free lease", n)
	}
	for _, d := range []time.Duration{0, -time.Second, elector.MaxTTL + time.Nanosecond, math.MaxInt64} {
		_, err := s.TryAcquire(ctx(t), name, "a", d, elector.Lease{})
		require.Error(t, err, "TryAcquire must refuse the TTL %v", d)
		assert.Contains(t, err.Error(), d.String())
	}
	_, err := s.TryAcquire(ctx(t), name, "", ttl, elector.Lease{})
	require.Error(t, err, "TryAcquire must refuse an empty holder")
	l := acquire(t, s, name, "a", elector.Lease{})
	for _, d := range []time.Duration{0, math.MaxInt64} {
		_, err = s.Renew(ctx(t), l, d)
		require.Error(t, err, "Renew must refuse the TTL %v", d)
	}
	got, err := s.Get(ctx(t), name)
	require.NoError(t, err, "a refused renewal must leave the lease alone")
	assertSame(t, l, got, "after refused renewals")
}

// testReleaseWakesWatcher checks stores that implement elector.ReleaseWatcher:
// a release through the store wakes a watcher of that name.
func testReleaseWakesWatcher(t *testing.T, s elector.Store, name string) {
	w, ok := s.(elector.ReleaseWatcher)
	if !ok {
		t.Skipf("%T does not implement elector.ReleaseWatcher", s)
	}
	released, stop := w.WatchRelease(name)
	defer stop()
	l := acquire(t, s, name, "a", elector.Lease{})
	require.NoError(t, s.Release(ctx(t), l))
	select {
	case <-released:
	case <-time.After(5 * time.Second):
		t.Fatal("Release did not wake a watcher of the lease within 5s")
	}
	stop()
	stop() // stop is idempotent
}

// testWatchLease checks stores that implement elector.LeaseWatcher: a
// watcher of a name receives each new state of the lease (held, renewed,
// free) within a few polls, and never a state older than one it received.
func testWatchLease(t *testing.T, s elector.Store, name string) {
	w, ok := s.(elector.LeaseWatcher)
	if !ok {
		t.Skipf("%T does not implement elector.LeaseWatcher", s)
	}
	const every = 100 * time.Millisecond
	states, stop := w.WatchLease(name, every)
	defer stop()
	// expect waits for want, skipping the states before it.
	expect := func(want elector.Lease, what string) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case got := <-states:
				if got.Token == want.Token && got.Version == want.Version {
					if want.Token != 0 {
						assertSame(t, want, got, what)
					}
					return
				}
				require.False(t, got.Token > want.Token || got.Token == want.Token && got.Version > want.Version,
					"%s: received %+v, newer than %+v", what, got, want)
			case <-deadline:
				t.Fatalf("%s: the watcher did not receive %+v within 5s", what, want)
			}
		}
	}
	l := acquire(t, s, name, "a", elector.Lease{})
	expect(l, "after TryAcquire")
	r, err := s.Renew(ctx(t), l, ttl)
	require.NoError(t, err)
	expect(r, "after Renew")
	require.NoError(t, s.Release(ctx(t), r))
	expect(elector.Lease{}, "after Release (free)")
	stop()
	stop() // stop is idempotent
}

// testWatchLeaseEveryRelease checks stores that implement
// elector.LeaseWatcher: every release reaches a watcher, even when the
// watcher was never sent the term it ended. A candidate that got the zero
// Lease and then found the lease taken by its own TryAcquire must hear
// that term's release too, not wait out the TTL.
func testWatchLeaseEveryRelease(t *testing.T, s elector.Store, name string) {
	w, ok := s.(elector.LeaseWatcher)
	if !ok {
		t.Skipf("%T does not implement elector.LeaseWatcher", s)
	}
	states, stop := w.WatchLease(name, time.Minute) // a poll must not be what delivers
	defer stop()
	for round := range 3 {
		l := acquire(t, s, name, "a", elector.Lease{})
		require.NoError(t, s.Release(ctx(t), l))
		deadline := time.After(5 * time.Second)
		for free := false; !free; {
			select {
			case got := <-states:
				free = got.Token == 0
			case <-deadline:
				t.Fatalf("release %d did not reach the watcher within 5s", round)
			}
		}
	}
}
