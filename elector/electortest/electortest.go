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
// The suite runs in real time with short TTLs and waits for expiry by
// polling, so it suits stores whose clock is a database server's. Lease names
// are unique per run, so a database that outlives the test does no harm.
package electortest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

const (
	longTTL  = time.Minute
	shortTTL = 150 * time.Millisecond
	// expiryWait bounds how long the suite waits for a short lease to expire.
	expiryWait = 10 * time.Second
)

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
		{"RenewExtends", testRenewExtends},
		{"LeaseLivesItsTTL", testLeaseLivesItsTTL},
		{"RenewExpiredUntaken", testRenewExpiredUntaken},
		{"RenewStale", testRenewStale},
		{"RenewAfterRelease", testRenewAfterRelease},
		{"ReleaseFrees", testReleaseFrees},
		{"ReleaseStaleChangesNothing", testReleaseStale},
		{"TokensIncrease", testTokensIncrease},
		{"GetNone", testGetNone},
		{"RaceAcquire", testRaceAcquire},
		{"BadInput", testBadInput},
		{"ReleaseWakesWatcher", testReleaseWakesWatcher},
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

func acquire(t *testing.T, s elector.Store, name, holder string, ttl time.Duration) elector.Lease {
	t.Helper()
	l, err := s.TryAcquire(ctx(t), name, holder, ttl)
	require.NoError(t, err, "TryAcquire(%q, %q)", name, holder)
	return l
}

// waitExpired polls Get until the lease has no live holder.
func waitExpired(t *testing.T, s elector.Store, name string) {
	t.Helper()
	deadline := time.Now().Add(expiryWait)
	c := ctx(t)
	for {
		_, err := s.Get(c, name)
		if errors.Is(err, elector.ErrNoLease) {
			return
		}
		require.NoError(t, err, "Get(%q)", name)
		if time.Now().After(deadline) {
			t.Fatalf("lease %q still live %v after a %v TTL", name, expiryWait, shortTTL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testAcquireFree(t *testing.T, s elector.Store, name string) {
	l := acquire(t, s, name, "a", longTTL)
	assert.Equal(t, name, l.Name)
	assert.Equal(t, "a", l.Holder)
	assert.NotZero(t, l.Token, "the first token must be positive")
	assert.False(t, l.ExpiresAt.IsZero(), "ExpiresAt must be set")
	got, err := s.Get(ctx(t), name)
	require.NoError(t, err)
	assert.Equal(t, l.Holder, got.Holder)
	assert.Equal(t, l.Token, got.Token)
}

func testHeldByOther(t *testing.T, s elector.Store, name string) {
	l := acquire(t, s, name, "holder-a", longTTL)
	_, err := s.TryAcquire(ctx(t), name, "holder-b", longTTL)
	require.ErrorIs(t, err, elector.ErrHeld)
	assert.Contains(t, err.Error(), "holder-a", "ErrHeld must name the live holder")
	var held *elector.HeldError
	if errors.As(err, &held) {
		assert.Equal(t, l.Token, held.Lease.Token)
	}
	got, err := s.Get(ctx(t), name)
	require.NoError(t, err)
	assert.Equal(t, l.Token, got.Token, "a refused TryAcquire must not change the lease")
}

func testHeldBySelf(t *testing.T, s elector.Store, name string) {
	l := acquire(t, s, name, "same", longTTL)
	_, err := s.TryAcquire(ctx(t), name, "same", longTTL)
	require.ErrorIs(t, err, elector.ErrHeld, "the live holder asking again must wait for its old lease")
	assert.Contains(t, err.Error(), "same")
	got, err := s.Get(ctx(t), name)
	require.NoError(t, err)
	assert.Equal(t, l.Token, got.Token)
}

func testNamesAreIndependent(t *testing.T, s elector.Store, name string) {
	acquire(t, s, name+"/1", "a", longTTL)
	l2 := acquire(t, s, name+"/2", "b", longTTL)
	got, err := s.Get(ctx(t), name+"/2")
	require.NoError(t, err)
	assert.Equal(t, "b", got.Holder)
	assert.Equal(t, l2.Token, got.Token)
}

func testRenewExtends(t *testing.T, s elector.Store, name string) {
	l := acquire(t, s, name, "a", longTTL)
	r, err := s.Renew(ctx(t), l, 2*longTTL)
	require.NoError(t, err)
	assert.Equal(t, l.Token, r.Token, "renewal keeps the token")
	assert.Equal(t, "a", r.Holder)
	assert.True(t, r.ExpiresAt.After(l.ExpiresAt), "renewal must extend ExpiresAt: %v then %v", l.ExpiresAt, r.ExpiresAt)
	assert.Less(t, r.ExpiresAt.Sub(l.ExpiresAt), 2*longTTL-longTTL/2,
		"renewal extends from now, not from the old expiry: %v then %v", l.ExpiresAt, r.ExpiresAt)
	// The renewed lease renews again.
	_, err = s.Renew(ctx(t), r, longTTL)
	require.NoError(t, err)
}

// testLeaseLivesItsTTL checks that a lease is not expired early: a lease of
// a few seconds is still live, and renewable, a second after it was taken.
func testLeaseLivesItsTTL(t *testing.T, s elector.Store, name string) {
	l := acquire(t, s, name, "a", 3*time.Second)
	time.Sleep(time.Second)
	got, err := s.Get(ctx(t), name)
	require.NoError(t, err, "a 3s lease must still be live after 1s")
	assert.Equal(t, l.Token, got.Token)
	_, err = s.Renew(ctx(t), l, 3*time.Second)
	require.NoError(t, err)
}

func testRenewExpiredUntaken(t *testing.T, s elector.Store, name string) {
	l := acquire(t, s, name, "a", shortTTL)
	waitExpired(t, s, name)
	_, err := s.Renew(ctx(t), l, longTTL)
	require.ErrorIs(t, err, elector.ErrLeaseLost, "renewing an expired lease must fail even if nobody took it")
	_, err = s.Get(ctx(t), name)
	require.ErrorIs(t, err, elector.ErrNoLease, "a refused renewal must not revive the lease")
}

func testRenewStale(t *testing.T, s elector.Store, name string) {
	old := acquire(t, s, name, "a", shortTTL)
	waitExpired(t, s, name)
	cur := acquire(t, s, name, "b", longTTL)
	_, err := s.Renew(ctx(t), old, longTTL)
	require.ErrorIs(t, err, elector.ErrLeaseLost)
	// Same holder name, old token: still stale.
	again := acquire(t, s, name+"/same-holder", "a", shortTTL)
	waitExpired(t, s, name+"/same-holder")
	acquire(t, s, name+"/same-holder", "a", longTTL)
	_, err = s.Renew(ctx(t), again, longTTL)
	require.ErrorIs(t, err, elector.ErrLeaseLost, "a holder's earlier term must not renew its later one")
	got, err := s.Get(ctx(t), name)
	require.NoError(t, err)
	assert.Equal(t, cur.Token, got.Token)
	assert.Equal(t, "b", got.Holder)
}

func testRenewAfterRelease(t *testing.T, s elector.Store, name string) {
	l := acquire(t, s, name, "a", longTTL)
	require.NoError(t, s.Release(ctx(t), l))
	_, err := s.Renew(ctx(t), l, longTTL)
	require.ErrorIs(t, err, elector.ErrLeaseLost)
}

func testReleaseFrees(t *testing.T, s elector.Store, name string) {
	l := acquire(t, s, name, "a", longTTL)
	require.NoError(t, s.Release(ctx(t), l))
	_, err := s.Get(ctx(t), name)
	require.ErrorIs(t, err, elector.ErrNoLease, "Release must free the lease at once")
	next := acquire(t, s, name, "b", longTTL)
	assert.Greater(t, next.Token, l.Token, "Release must never lower the token")
	require.NoError(t, s.Release(ctx(t), l), "releasing a stale lease returns nil")
	require.NoError(t, s.Release(ctx(t), next))
	require.NoError(t, s.Release(ctx(t), next), "releasing twice returns nil")
}

func testReleaseStale(t *testing.T, s elector.Store, name string) {
	old := acquire(t, s, name, "a", shortTTL)
	waitExpired(t, s, name)
	cur := acquire(t, s, name, "b", longTTL)
	require.NoError(t, s.Release(ctx(t), old))
	got, err := s.Get(ctx(t), name)
	require.NoError(t, err, "releasing a stale lease must not free the current one")
	assert.Equal(t, cur.Token, got.Token)
	assert.Equal(t, "b", got.Holder)
	_, err = s.TryAcquire(ctx(t), name, "c", longTTL)
	require.ErrorIs(t, err, elector.ErrHeld)

	// The same holder's earlier term does not free its later one.
	same := name + "/same-holder"
	first := acquire(t, s, same, "a", shortTTL)
	waitExpired(t, s, same)
	second := acquire(t, s, same, "a", longTTL)
	require.NoError(t, s.Release(ctx(t), first))
	got, err = s.Get(ctx(t), same)
	require.NoError(t, err, "releasing a holder's stale term must not free its current one")
	assert.Equal(t, second.Token, got.Token)
}

func testTokensIncrease(t *testing.T, s elector.Store, name string) {
	var last uint64
	check := func(l elector.Lease, after string) {
		t.Helper()
		assert.Greater(t, l.Token, last, "token after %s", after)
		last = l.Token
	}
	l := acquire(t, s, name, "a", longTTL)
	check(l, "first acquire")
	require.NoError(t, s.Release(ctx(t), l))
	l = acquire(t, s, name, "a", shortTTL)
	check(l, "release (same holder)")
	waitExpired(t, s, name)
	l = acquire(t, s, name, "b", shortTTL)
	check(l, "expiry (takeover)")
	waitExpired(t, s, name)
	l = acquire(t, s, name, "b", longTTL)
	check(l, "expiry (same holder)")
	r, err := s.Renew(ctx(t), l, longTTL)
	require.NoError(t, err)
	assert.Equal(t, l.Token, r.Token, "renewal keeps the token")
	require.NoError(t, s.Release(ctx(t), r))
	l = acquire(t, s, name, "c", longTTL)
	check(l, "release (other holder)")
}

func testGetNone(t *testing.T, s elector.Store, name string) {
	_, err := s.Get(ctx(t), name)
	require.ErrorIs(t, err, elector.ErrNoLease)
}

func testRaceAcquire(t *testing.T, s elector.Store, name string) {
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
			_, errs[i] = s.TryAcquire(ctx(t), name, fmt.Sprintf("racer-%d", i), longTTL)
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

func testBadInput(t *testing.T, s elector.Store, name string) {
	bad := []string{"", "tab\there", "nul\x00", strings.Repeat("x", 256), "\xff\xfe"}
	for _, n := range bad {
		_, err := s.TryAcquire(ctx(t), n, "a", longTTL)
		require.Error(t, err, "TryAcquire must refuse the lease name %q", n)
		assert.NotErrorIs(t, err, elector.ErrHeld)
		_, err = s.Get(ctx(t), n)
		require.Error(t, err, "Get must refuse the lease name %q", n)
		assert.NotErrorIs(t, err, elector.ErrNoLease, "Get(%q) must report the bad name, not a missing lease", n)
	}
	for _, ttl := range []time.Duration{0, -time.Second} {
		_, err := s.TryAcquire(ctx(t), name, "a", ttl)
		require.Error(t, err, "TryAcquire must refuse the TTL %v", ttl)
		assert.Contains(t, err.Error(), ttl.String())
	}
	_, err := s.TryAcquire(ctx(t), name, "", longTTL)
	require.Error(t, err, "TryAcquire must refuse an empty holder")
	l := acquire(t, s, name, "a", longTTL)
	_, err = s.Renew(ctx(t), l, 0)
	require.Error(t, err, "Renew must refuse a zero TTL")
	got, err := s.Get(ctx(t), name)
	require.NoError(t, err, "a refused renewal must leave the lease alone")
	assert.Equal(t, l.Token, got.Token)
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
	l := acquire(t, s, name, "a", longTTL)
	require.NoError(t, s.Release(ctx(t), l))
	select {
	case <-released:
	case <-time.After(5 * time.Second):
		t.Fatal("Release did not wake a watcher of the lease within 5s")
	}
	stop()
	stop() // stop is idempotent
}
