package mysqllease

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/elector/electortest"
	"github.com/leaderaware/leaderaware/internal/testing/counting"
)

// TestNotifier runs the conformance check of elector.Notifier with writes
// through another Store on the same table.
func TestNotifier(t *testing.T) {
	table := freshTable(t)
	electortest.TestNotifier(t, openStore(t, table), openStore(t, table))
}

// wakeBound is how soon a candidate must take a lease released through
// another Store: a poll (250ms) and a read, with margin, far below the
// RetryInterval (10s) of the elector's own reads.
const wakeBound = 1500 * time.Millisecond

// TestReleaseWakesCandidate proves that a candidate waiting on a lease held
// through another Store (another replica) takes it within wakeBound of its
// release, although its elector reads the lease only every 10s.
func TestReleaseWakesCandidate(t *testing.T) {
	table := freshTable(t)
	cfg := elector.Config{TTL: time.Minute, RetryInterval: 10 * time.Second, Holder: "holder"}
	holder, err := elector.New(openStore(t, table), "wake", cfg)
	require.NoError(t, err)
	cand := &counting.Store[*Store]{S: openStore(t, table)}
	cfg.Holder = "candidate"
	candidate, err := elector.New(cand, "wake", cfg)
	require.NoError(t, err)

	for round := range 3 {
		term, err := holder.Campaign(testCtx(t))
		require.NoError(t, err)
		acquires, reads := cand.Acquires.Load(), cand.Reads.Load()
		ctx, cancel := context.WithCancel(testCtx(t))
		won := make(chan elector.Term, 1)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if term, err := candidate.Campaign(ctx); err == nil {
				won <- term
			}
		}()
		// Release only once the candidate watches: it was refused and its
		// watch has read the lease.
		require.Eventually(t, func() bool {
			return cand.Acquires.Load() > acquires && cand.Reads.Load() > reads
		}, 5*time.Second, 5*time.Millisecond)
		start := time.Now()
		require.NoError(t, term.Resign(testCtx(t)))
		select {
		case term := <-won:
			t.Logf("round %d: the candidate took the lease %v after its release", round, time.Since(start))
			require.NoError(t, term.Resign(testCtx(t)))
		case <-time.After(wakeBound):
			t.Errorf("round %d: the candidate did not take the lease within %v of its release", round, wakeBound)
		}
		cancel()
		<-done
		select {
		case term := <-won: // won as the wait ended
			require.NoError(t, term.Resign(testCtx(t)))
		default:
		}
	}
}

// TestMarkMoves proves that the mark the poll reads moves with every
// acquire and release, a takeover of a released lease included, through
// any Store on the table, and not with renewals.
func TestMarkMoves(t *testing.T) {
	table := freshTable(t)
	s, other := openStore(t, table), openStore(t, table)
	last, err := s.readMark(testCtx(t))
	require.NoError(t, err)
	moved := func(what string, want bool) {
		t.Helper()
		m, err := s.readMark(testCtx(t))
		require.NoError(t, err)
		assert.Equal(t, want, m != last, "%s: mark %+v, before %+v", what, m, last)
		last = m
	}
	l, err := other.TryAcquire(testCtx(t), "m", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	moved("a new lease", true)
	l, err = other.Renew(testCtx(t), l, time.Minute)
	require.NoError(t, err)
	_, err = other.RenewMany(testCtx(t), []elector.Lease{l})
	require.NoError(t, err)
	moved("renewals", false)
	require.NoError(t, other.Release(testCtx(t), l))
	moved("a release", true)
	_, err = other.TryAcquire(testCtx(t), "m", "b", time.Minute, elector.Lease{})
	require.NoError(t, err)
	moved("a takeover of the released lease", true)
}

// TestPollLifetime proves that one poll per Store runs from the first
// Notify to the last stop, which waits for it (goleak in TestMain checks
// its goroutine), and from the next Notify to Close; and that Notify after
// Close starts none and never calls back.
func TestPollLifetime(t *testing.T) {
	s, err := Open(testCtx(t), testDSN(t), WithTable(freshTable(t)))
	require.NoError(t, err)
	polling := func() bool {
		return s.changes.Running()
	}
	require.False(t, polling(), "no poll before the first Notify")
	first := make(chan elector.Change, 1)
	stopA := s.Notify(func(c elector.Change) {
		select {
		case first <- c:
		default:
		}
	})
	stopB := s.Notify(func(elector.Change) {})
	require.True(t, polling())
	select {
	case c := <-first:
		assert.Equal(t, elector.Change{}, c, "the first read asks for every lease to be read")
	case <-time.After(5 * time.Second):
		t.Fatal("the poll's first read did not call back")
	}
	stopA()
	stopA() // stop is idempotent
	assert.True(t, polling(), "the poll runs while a subscriber is left")
	stopB()
	assert.False(t, polling(), "the last stop stops the poll")

	stopC := s.Notify(func(elector.Change) {})
	defer stopC()
	require.True(t, polling(), "the next Notify starts a poll again")
	require.NoError(t, s.Close())
	assert.False(t, polling(), "Close stops the poll")
	stop := s.Notify(func(elector.Change) { t.Error("a callback after Close") })
	defer stop()
	assert.False(t, polling(), "Notify after Close starts no poll")
}
