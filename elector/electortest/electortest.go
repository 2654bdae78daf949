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
		{"GetMany", testGetMany},
		{"RenewMany", testRenewMany},
		{"Notify", func(t *testing.T, s elector.Store, name string) { testNotify(t, s, s, name) }},
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

// testGetMany checks stores that implement elector.BulkReader: GetMany
// returns each name's state in order, the zero Lease with only Name set for
// a free one, and a held one as Get returns it.
func testGetMany(t *testing.T, s elector.Store, name string) {
	b, ok := s.(elector.BulkReader)
	if !ok {
		t.Skipf("%T does not implement elector.BulkReader", s)
	}
	got, err := b.GetMany(ctx(t), nil)
	require.NoError(t, err, "GetMany of no names")
	assert.Empty(t, got, "GetMany of no names")
	held, never, released := name+"/held", name+"/never", name+"/released"
	h := acquire(t, s, held, "a", elector.Lease{})
	r := acquire(t, s, released, "b", elector.Lease{})
	require.NoError(t, s.Release(ctx(t), r))
	names := []string{never, held, released, held}
	got, err = b.GetMany(ctx(t), names)
	require.NoError(t, err)
	require.Len(t, got, len(names), "one state per name, in order")
	viaGet, err := s.Get(ctx(t), held)
	require.NoError(t, err)
	for i, n := range names {
		if n == held {
			assertSame(t, viaGet, got[i], fmt.Sprintf("GetMany[%d], held, against Get", i))
			assert.Equal(t, held, got[i].Name, "GetMany[%d]", i)
			assertSame(t, h, got[i], fmt.Sprintf("GetMany[%d], held, against TryAcquire", i))
		} else {
			assert.Equal(t, elector.Lease{Name: n}, got[i], "GetMany[%d]: a free lease is the zero Lease with its Name", i)
		}
	}
}

// testRenewMany checks stores that implement elector.BatchRenewer: one
// RenewMany renews each current term for its own TTL and bumps its Version,
// and returns the zero Lease for a term taken over or released, in order.
func testRenewMany(t *testing.T, s elector.Store, name string) {
	b, ok := s.(elector.BatchRenewer)
	if !ok {
		t.Skipf("%T does not implement elector.BatchRenewer", s)
	}
	got, err := b.RenewMany(ctx(t), nil)
	require.NoError(t, err, "RenewMany of no terms")
	assert.Empty(t, got, "RenewMany of no terms")
	one := acquire(t, s, name+"/one", "a", elector.Lease{})
	two := acquire(t, s, name+"/two", "a", elector.Lease{})
	lost := acquire(t, s, name+"/lost", "a", elector.Lease{})
	taker := acquire(t, s, name+"/lost", "b", lost) // a takeover after the watch
	released := acquire(t, s, name+"/released", "a", elector.Lease{})
	require.NoError(t, s.Release(ctx(t), released))
	one.TTL, two.TTL = 2*ttl, 3*ttl
	terms := []elector.Lease{one, lost, two, released}
	got, err = b.RenewMany(ctx(t), terms)
	require.NoError(t, err)
	require.Len(t, got, len(terms), "one state per term, in order")
	for i, want := range []elector.Lease{one, two} {
		r := got[2*i]
		assert.Equal(t, want.Name, r.Name, "a renewed term")
		assert.Equal(t, want.Holder, r.Holder, "a renewed term")
		assert.Equal(t, want.Token, r.Token, "a renewal keeps the token")
		assert.Greater(t, r.Version, want.Version, "a renewal bumps the version")
		assert.Equal(t, want.TTL, r.TTL, "a term renews for its own TTL")
		cur, err := s.Get(ctx(t), want.Name)
		require.NoError(t, err)
		assertSame(t, r, cur, "Get after RenewMany")
	}
	assert.Zero(t, got[1], "a term taken over is not renewed")
	assert.Zero(t, got[3], "a released term is not renewed")
	cur, err := s.Get(ctx(t), name+"/lost")
	require.NoError(t, err)
	assertSame(t, taker, cur, "RenewMany must leave a lease taken over alone")
	_, err = s.Get(ctx(t), name+"/released")
	require.ErrorIs(t, err, elector.ErrNoLease, "RenewMany must leave a released lease free")
}

// notifyBound is how soon a change must reach a Notify callback.
const notifyBound = 5 * time.Second

// TestNotifier checks a store that implements elector.Notifier against
// writes by writer, another instance of the same store on the same data
// (another Open of one database), as other replicas write: a new term and
// its release reach watcher's callback within a few seconds, as the state
// or as a request to read the lease again, and so does every release of a
// quick sequence of terms. TestStore runs it with one instance as both.
func TestNotifier(t *testing.T, watcher, writer elector.Store) {
	testNotify(t, watcher, writer, fmt.Sprintf("electortest/Notifier/%d-%d", runID, calls.Add(1)))
}

func testNotify(t *testing.T, watcher, writer elector.Store, name string) {
	n, ok := watcher.(elector.Notifier)
	if !ok {
		t.Skipf("%T does not implement elector.Notifier", watcher)
	}
	var (
		mu      sync.Mutex
		changes []elector.Change
		stopped bool // stop has returned
		late    atomic.Bool
	)
	woken := make(chan struct{}, 1)
	stopNotify := n.Notify(func(c elector.Change) {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			late.Store(true)
		}
		changes = append(changes, c)
		select {
		case woken <- struct{}{}:
		default:
		}
	})
	stop := sync.OnceFunc(func() {
		stopNotify()
		mu.Lock()
		stopped = true
		mu.Unlock()
	})
	defer stop()
	// expect waits for a change that shows want (the zero Lease: free):
	// its state, or a request to read name that a Get then answers with it.
	expect := func(want elector.Lease, what string) {
		t.Helper()
		deadline := time.NewTimer(notifyBound)
		defer deadline.Stop()
		for {
			mu.Lock()
			got := changes
			changes = nil
			mu.Unlock()
			for _, c := range got {
				if c.Name != "" && c.Name != name {
					continue
				}
				state := c.State
				if !c.Known {
					l, err := watcher.Get(ctx(t), name)
					if err != nil {
						require.ErrorIs(t, err, elector.ErrNoLease, "%s: Get after a change", what)
						l = elector.Lease{}
					}
					state = l
				} else {
					assert.Equal(t, name, c.Name, "%s: a known change names its lease", what)
				}
				if state.Token == want.Token && (want.Token == 0 || state.Version == want.Version) {
					if want.Token != 0 {
						assertSame(t, want, state, what)
					}
					return
				}
			}
			select {
			case <-woken:
			case <-deadline.C:
				t.Fatalf("%s: the Notify callback did not learn of %+v within %v", what, want, notifyBound)
			}
		}
	}
	l := acquire(t, writer, name, "a", elector.Lease{})
	expect(l, "a new term by another writer")
	require.NoError(t, writer.Release(ctx(t), l))
	expect(elector.Lease{}, "its release")
	for round := range 5 {
		l := acquire(t, writer, name, "a", elector.Lease{})
		require.NoError(t, writer.Release(ctx(t), l))
		expect(elector.Lease{}, fmt.Sprintf("release %d of a quick sequence", round))
	}
	stop()
	l = acquire(t, writer, name, "a", elector.Lease{})
	require.NoError(t, writer.Release(ctx(t), l))
	time.Sleep(100 * time.Millisecond)
	assert.False(t, late.Load(), "Notify called its callback after stop returned")
}
