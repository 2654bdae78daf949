package elector_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/clock"
	"github.com/leaderaware/leaderaware/internal/testing/stepclock"
)

// countingStore counts calls and can fail renewals. Embedding elector.Store
// hides the memory store's Notifier and BulkReader, as any such wrapper does.
type countingStore struct {
	elector.Store
	acquires, renews, releases atomic.Int64
	renewErr                   atomic.Pointer[error] // if set, Renew fails with it
}

// Clock passes on the Store's clock.
func (c *countingStore) Clock() clock.Clock { return clock.Of(c.Store) }

func (c *countingStore) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	c.acquires.Add(1)
	return c.Store.TryAcquire(ctx, name, holder, ttl, observed)
}

func (c *countingStore) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	c.renews.Add(1)
	if err := c.renewErr.Load(); err != nil {
		return elector.Lease{}, *err
	}
	return c.Store.Renew(ctx, l, ttl)
}

func (c *countingStore) Release(ctx context.Context, l elector.Lease) error {
	c.releases.Add(1)
	return c.Store.Release(ctx, l)
}

func (c *countingStore) failRenewals(err error) { c.renewErr.Store(&err) }

var fast = elector.Config{TTL: 3 * time.Second, RenewInterval: time.Second, RetryInterval: 2 * time.Second}

func newElector(t *testing.T, s elector.Store, holder string, cfg elector.Config) *elector.LeaseElector {
	t.Helper()
	cfg.Holder = holder
	e, err := elector.New(s, "job", cfg)
	require.NoError(t, err)
	return e
}

func campaign(t *testing.T, e elector.Elector) elector.Term {
	t.Helper()
	term, err := e.Campaign(t.Context())
	require.NoError(t, err)
	return term
}

func TestNewRefusesBadInput(t *testing.T) {
	s := elector.NewMemoryStore()
	tests := []struct {
		name    string
		lease   string
		cfg     elector.Config
		wantErr string // a piece of the message naming the bad value
	}{
		{"empty name", "", elector.Config{}, "empty"},
		{"long name", strings.Repeat("n", 256), elector.Config{}, "256 bytes"},
		{"control char", "job\n1", elector.Config{}, `"job\n1"`},
		{"invalid utf8", "job\xff", elector.Config{}, "UTF-8"},
		{"negative TTL", "job", elector.Config{TTL: -time.Second}, "TTL -1s"},
		{"negative renew", "job", elector.Config{RenewInterval: -time.Second}, "RenewInterval -1s"},
		{"negative retry", "job", elector.Config{RetryInterval: -5 * time.Millisecond}, "RetryInterval -5ms"},
		{"TTL equals renew", "job", elector.Config{TTL: time.Second, RenewInterval: time.Second}, "TTL 1s"},
		{"TTL below renew", "job", elector.Config{TTL: time.Second, RenewInterval: 2 * time.Second}, "RenewInterval 2s"},
		{"one renewal only", "job", elector.Config{TTL: 10 * time.Second, RenewInterval: 5 * time.Second}, "RenewInterval 5s"},
		{"TTL too short", "job", elector.Config{TTL: 2}, "TTL 2ns"},
		{"bad holder", "job", elector.Config{Holder: "a\tb"}, `"a\tb"`},
		{"TTL below the floor", "job", elector.Config{TTL: time.Millisecond}, "floor of 100ms"},
		{"TTL over a day", "job", elector.Config{TTL: 25 * time.Hour}, "TTL 25h0m0s is over the limit of 24h0m0s"},
		{"TTL overflows", "job", elector.Config{TTL: math.MaxInt64}, "TTL 2562047h47m16.854775807s"},
		{"retry over a day", "job", elector.Config{RetryInterval: 25 * time.Hour}, "RetryInterval 25h0m0s"},
		{"retry below the floor", "job", elector.Config{RetryInterval: time.Microsecond}, "RetryInterval 1µs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := elector.New(s, tt.lease, tt.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
	_, err := elector.New(nil, "job", elector.Config{})
	require.ErrorContains(t, err, "nil Store")
}

func TestNewDefaults(t *testing.T) {
	e, err := elector.New(elector.NewMemoryStore(), "job", elector.Config{})
	require.NoError(t, err)
	cfg := e.Config()
	assert.Equal(t, 15*time.Second, cfg.TTL)
	assert.Equal(t, 5*time.Second, cfg.RenewInterval)
	assert.Equal(t, 2*time.Second, cfg.RetryInterval)
	assert.NotEmpty(t, cfg.Holder)
	other, err := elector.New(elector.NewMemoryStore(), "job", elector.Config{})
	require.NoError(t, err)
	assert.Equal(t, cfg.Holder, other.Config().Holder, "one default holder per process")
	assert.Equal(t, elector.DefaultHolder(), cfg.Holder)
	assert.Regexp(t, fmt.Sprintf(`^.+-%d-[0-9a-f]{8}$`, os.Getpid()), cfg.Holder, "host-pid-random")
	// The tightest timing that leaves room for two renewals is accepted.
	_, err = elector.New(elector.NewMemoryStore(), "job", elector.Config{TTL: 10 * time.Second, RenewInterval: 4500 * time.Millisecond})
	require.NoError(t, err)
}

func TestTermRenewsWhileHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &countingStore{Store: elector.NewMemoryStore()}
		e := newElector(t, s, "a", fast)
		term := campaign(t, e)
		time.Sleep(time.Minute) // bubble time: 60 renewals at 1s
		select {
		case <-term.Done():
			t.Fatalf("term ended while renewals succeed: %v", term.Err())
		default:
		}
		require.NoError(t, term.Err())
		assert.InDelta(t, 60, s.renews.Load(), 1, "one renewal per RenewInterval")
		l, err := e.Leader(t.Context())
		require.NoError(t, err)
		assert.Equal(t, "a", l.Holder)
		assert.Equal(t, term.Token(), l.Token)
		require.NoError(t, term.Resign(t.Context()))
	})
}

func TestTermExpiresBeforeOthersCanAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := elector.NewMemoryStore()
		s := &countingStore{Store: mem}
		e := newElector(t, s, "a", fast)
		start := time.Now()
		term := campaign(t, e)
		s.failRenewals(errors.New("disk unplugged"))
		won := make(chan elector.Term)
		go func() { // a candidate watching from the first instant
			tb, err := newElector(t, mem, "b", fast).Campaign(t.Context())
			assert.NoError(t, err)
			won <- tb
		}()

		<-term.Done()
		endedAt := time.Now()
		require.ErrorIs(t, term.Err(), elector.ErrLeaseExpired)
		assert.Contains(t, term.Err().Error(), "disk unplugged", "the term's error names the last renewal failure")
		assert.Equal(t, start.Add(fast.TTL-elector.SafetyMargin(fast.TTL)), endedAt, "the trust window is TTL minus the margin from the acquire")
		assert.GreaterOrEqual(t, s.renews.Load(), int64(2), "at least two renewal attempts inside the trust window")
		tb := <-won
		wonAt := time.Now()
		require.NoError(t, tb.Resign(t.Context()))
		assert.True(t, wonAt.After(endedAt), "the candidate took over at %v, before the holder's term ended at %v", wonAt, endedAt)
		assert.Equal(t, start.Add(fast.TTL), wonAt, "the watching candidate takes over one TTL after it first saw the lease")
		require.NoError(t, term.Resign(t.Context()))
	})
}

// TestSuspendEndsTermAtNextWake checks that trust windows count time the
// machine spent suspended: a holder that wakes from a long suspend ends its
// term (at once: see TestSuspendEndsTermAtOnce) instead of renewing a lease
// that others may have taken over meanwhile.
func TestSuspendEndsTermAtNextWake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := stepclock.New()
		s := &countingStore{Store: elector.NewMemoryStoreOn(c)}
		term := campaign(t, newElector(t, s, "a", fast))
		c.Suspend(time.Hour)
		time.Sleep(fast.RenewInterval)
		synctest.Wait()
		select {
		case <-term.Done():
		default:
			t.Fatal("the term survived a one-hour suspend")
		}
		require.ErrorIs(t, term.Err(), elector.ErrLeaseExpired)
		assert.Zero(t, s.renews.Load(), "no renewal after the trust window closed during the suspend")
		require.NoError(t, term.Resign(t.Context()))
	})
}

// TestClockStepsMakeNoSecondLeader steps the wall clock back and forth
// while a holder renews and a candidate watches: no wall clock is ever
// compared, so the candidate never takes over a renewed lease.
func TestClockStepsMakeNoSecondLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := stepclock.New()
		s := elector.NewMemoryStoreOn(c)
		ta := campaign(t, newElector(t, s, "a", fast))
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		errc := make(chan error)
		go func() {
			_, err := newElector(t, s, "b", fast).Campaign(ctx)
			errc <- err
		}()
		for i := range 20 {
			time.Sleep(2 * time.Second)
			c.Step(time.Duration(1-2*(i%2)) * time.Hour)
		}
		require.ErrorIs(t, <-errc, context.DeadlineExceeded, "the candidate must not take over a lease that is renewed")
		require.NoError(t, ta.Resign(t.Context()))
	})
}

func TestTermEndsWhenLeaseLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &countingStore{Store: elector.NewMemoryStore()}
		e := newElector(t, s, "a", fast)
		term := campaign(t, e)
		s.failRenewals(elector.ErrLeaseLost)
		<-term.Done()
		require.ErrorIs(t, term.Err(), elector.ErrLeaseLost)
		assert.EqualValues(t, 1, s.renews.Load(), "a lost lease is not retried")
		require.NoError(t, term.Resign(t.Context()))
		assert.ErrorIs(t, term.Err(), elector.ErrLeaseLost, "Resign keeps the first cause")
	})
}

func TestTermSurvivesTransientRenewFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &countingStore{Store: elector.NewMemoryStore()}
		e := newElector(t, s, "a", fast)
		term := campaign(t, e)
		s.failRenewals(errors.New("busy"))
		time.Sleep(1500 * time.Millisecond) // one failed renewal at 1s
		s.renewErr.Store(nil)
		time.Sleep(10 * time.Second)
		select {
		case <-term.Done():
			t.Fatalf("term ended after a transient failure: %v", term.Err())
		default:
		}
		require.NoError(t, term.Resign(t.Context()))
	})
}

func TestResignFreesAtOnceAndIsIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &countingStore{Store: elector.NewMemoryStore()}
		e := newElector(t, s, "a", fast)
		term := campaign(t, e)
		require.NoError(t, term.Resign(t.Context()))
		<-term.Done()
		require.ErrorIs(t, term.Err(), elector.ErrResigned)
		_, err := e.Leader(t.Context())
		require.ErrorIs(t, err, elector.ErrNoLease, "Resign frees the lease at once")
		require.NoError(t, term.Resign(t.Context()))
		assert.EqualValues(t, 1, s.releases.Load(), "a second Resign does not release again")
		renews := s.renews.Load()
		time.Sleep(time.Minute)
		assert.Equal(t, renews, s.renews.Load(), "no renewal after Resign")
	})
}

func TestReleaseWakesWaitingCandidate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := elector.NewMemoryStore() // a Notifier
		slow := fast
		slow.RetryInterval = time.Minute
		a := newElector(t, s, "a", slow)
		b := newElector(t, s, "b", slow)
		ta := campaign(t, a)
		won := make(chan elector.Term)
		go func() {
			tb, err := b.Campaign(t.Context())
			assert.NoError(t, err)
			won <- tb
		}()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		released := time.Now()
		require.NoError(t, ta.Resign(t.Context()))
		tb := <-won
		assert.Less(t, time.Since(released), 10*time.Millisecond, "a waiting candidate takes a released lease at once")
		assert.Greater(t, tb.Token(), ta.Token())
		require.NoError(t, tb.Resign(t.Context()))
	})
}

func TestCandidatePollsWithoutWatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &countingStore{Store: elector.NewMemoryStore()} // hides the watcher
		a := newElector(t, s, "a", fast)
		b := newElector(t, s, "b", fast)
		ta := campaign(t, a)
		won := make(chan elector.Term)
		go func() {
			tb, err := b.Campaign(t.Context())
			assert.NoError(t, err)
			won <- tb
		}()
		time.Sleep(5 * time.Second)
		released := time.Now()
		require.NoError(t, ta.Resign(t.Context()))
		tb := <-won
		assert.LessOrEqual(t, time.Since(released), fast.RetryInterval, "polling takes the lease within one RetryInterval")
		require.NoError(t, tb.Resign(t.Context()))
	})
}

func TestFreshCandidateWaitsOneTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := elector.NewMemoryStore()
		crashed, err := s.TryAcquire(t.Context(), "job", "crashed", fast.TTL, elector.Lease{}) // never renewed
		require.NoError(t, err)
		time.Sleep(time.Hour) // long dead, but the candidate cannot know for how long
		start := time.Now()
		tb := campaign(t, newElector(t, s, "b", fast))
		assert.Equal(t, fast.TTL, time.Since(start), "a fresh candidate watches the lease for one TTL")
		assert.Greater(t, tb.Token(), crashed.Token)
		require.NoError(t, tb.Resign(t.Context()))
	})
}

func TestWatchingCandidateReplacesCrashWithinTTLPlusRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &countingStore{Store: elector.NewMemoryStore()}
		ta := campaign(t, newElector(t, s, "a", fast))
		won := make(chan elector.Term)
		go func() {
			tb, err := newElector(t, s, "b", fast).Campaign(t.Context())
			assert.NoError(t, err)
			won <- tb
		}()
		time.Sleep(10*time.Second + 100*time.Millisecond) // renewals at 1s, 2s, ... 10s
		s.failRenewals(errors.New("crashed"))             // from now on the holder is as good as dead
		lastRenewal := time.Now().Add(-100 * time.Millisecond)
		tb := <-won
		took := time.Since(lastRenewal)
		require.NoError(t, tb.Resign(t.Context()))
		assert.Greater(t, took, fast.TTL-elector.SafetyMargin(fast.TTL), "not before the holder's trust window closed")
		assert.LessOrEqual(t, took, fast.TTL+fast.RetryInterval, "a watching candidate replaces a crashed holder within TTL + RetryInterval of its last renewal")
		require.NoError(t, ta.Resign(t.Context()))
	})
}

// longTTLStore reports every lease with a long TTL, as a holder with a
// longer TTL than the candidate's would.
type longTTLStore struct{ elector.Store }

func (s longTTLStore) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	l, err := s.Store.TryAcquire(ctx, name, holder, ttl, observed)
	var held *elector.HeldError
	if errors.As(err, &held) {
		held.Lease.TTL = time.Minute
	}
	return l, err
}

func TestCandidateWatchesForTheHoldersTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := elector.NewMemoryStore()
		_, err := mem.TryAcquire(t.Context(), "job", "crashed", time.Minute, elector.Lease{})
		require.NoError(t, err)
		start := time.Now()
		tb := campaign(t, newElector(t, longTTLStore{mem}, "b", fast))
		assert.Equal(t, time.Minute, time.Since(start), "the candidate waits the holder's TTL, not its own shorter one")
		require.NoError(t, tb.Resign(t.Context()))
	})
}

func TestAbandonLeavesTheLeaseToRunOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &countingStore{Store: elector.NewMemoryStore()}
		ta := campaign(t, newElector(t, s, "a", fast))
		ta.Abandon()
		<-ta.Done()
		require.ErrorIs(t, ta.Err(), elector.ErrAbandoned)
		require.NoError(t, ta.Resign(t.Context()), "Resign after Abandon does nothing")
		assert.Zero(t, s.releases.Load(), "Abandon never releases")
		renews := s.renews.Load()
		start := time.Now()
		tb := campaign(t, newElector(t, s, "b", fast))
		assert.Equal(t, fast.TTL, time.Since(start), "an abandoned lease is taken over after one TTL")
		assert.Equal(t, renews, s.renews.Load(), "no renewal after Abandon")
		require.NoError(t, tb.Resign(t.Context()))
	})
}

func TestTokensIncreaseAcrossTerms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := elector.NewMemoryStore()
		electors := []*elector.LeaseElector{newElector(t, s, "a", fast), newElector(t, s, "b", fast)}
		var last uint64
		for i := range 10 {
			term := campaign(t, electors[i%2])
			assert.Greater(t, term.Token(), last)
			last = term.Token()
			require.NoError(t, term.Resign(t.Context()))
		}
	})
}

func TestCampaignEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := elector.NewMemoryStore()
		held := campaign(t, newElector(t, s, "a", fast))
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		_, err := newElector(t, s, "b", fast).Campaign(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NoError(t, held.Resign(t.Context()))
	})
}

type brokenStore struct{ elector.Store }

func (brokenStore) TryAcquire(context.Context, string, string, time.Duration, elector.Lease) (elector.Lease, error) {
	return elector.Lease{}, errors.New("database is on fire")
}

func TestCampaignReturnsStoreErrors(t *testing.T) {
	e := newElector(t, brokenStore{elector.NewMemoryStore()}, "a", fast)
	_, err := e.Campaign(t.Context())
	require.ErrorContains(t, err, "database is on fire")
	assert.Contains(t, err.Error(), `"job"`, "the error names the lease")
}

func TestTermInContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, ok := elector.TermFromContext(t.Context())
		assert.False(t, ok)
		_, ok = elector.LeaseFromContext(t.Context())
		assert.False(t, ok)
		term := campaign(t, newElector(t, elector.NewMemoryStore(), "a", fast))
		ctx := elector.ContextWithTerm(t.Context(), term)
		got, ok := elector.TermFromContext(ctx)
		require.True(t, ok)
		assert.Equal(t, term, got)
		l, ok := elector.LeaseFromContext(ctx)
		require.True(t, ok)
		assert.Equal(t, term.Lease(), l)
		assert.Equal(t, "a", l.Holder)
		assert.Equal(t, term.Token(), l.Token)
		require.NoError(t, term.Resign(t.Context()))
	})
}

// slowStore delays the answer of TryAcquire (after the store acted) and
// Renew (before, ignoring the context) by a bubble-time duration.
type slowStore struct {
	countingStore
	acquireDelay, renewDelay atomic.Int64 // nanoseconds
}

func (s *slowStore) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	l, err := s.countingStore.TryAcquire(ctx, name, holder, ttl, observed)
	time.Sleep(time.Duration(s.acquireDelay.Load()))
	return l, err
}

func (s *slowStore) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	time.Sleep(time.Duration(s.renewDelay.Load()))
	return s.countingStore.Renew(ctx, l, ttl)
}

func TestCampaignRefusesTermPastItsTrustWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &slowStore{countingStore: countingStore{Store: elector.NewMemoryStore()}}
		s.acquireDelay.Store(int64(fast.TTL)) // the store answers after the trust window closed
		e := newElector(t, s, "a", fast)
		done := make(chan elector.Term)
		go func() {
			term, err := e.Campaign(t.Context())
			assert.NoError(t, err)
			done <- term
		}()
		time.Sleep(fast.TTL + time.Millisecond)
		synctest.Wait()
		assert.EqualValues(t, 1, s.releases.Load(), "a term acquired too slowly is given back")
		s.acquireDelay.Store(0)
		term := <-done
		assert.EqualValues(t, 2, term.Token(), "the campaign retries and wins a fresh term")
		require.NoError(t, term.Resign(t.Context()))
	})
}

func TestSlowAcquireStillRenewsInTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &slowStore{countingStore: countingStore{Store: elector.NewMemoryStore()}}
		s.acquireDelay.Store(int64(2 * time.Second)) // inside the 2.7s trust window, past one RenewInterval
		e := newElector(t, s, "a", fast)
		term := campaign(t, e)
		time.Sleep(30 * time.Second)
		select {
		case <-term.Done():
			t.Fatalf("term ended though every renewal succeeded: %v", term.Err())
		default:
		}
		require.NoError(t, term.Resign(t.Context()))
	})
}

func TestHangingRenewEndsTermOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &slowStore{countingStore: countingStore{Store: elector.NewMemoryStore()}}
		e := newElector(t, s, "a", fast)
		start := time.Now()
		term := campaign(t, e)
		s.renewDelay.Store(int64(10 * time.Second)) // the store ignores the call's context
		<-term.Done()
		assert.Equal(t, start.Add(fast.TTL-elector.SafetyMargin(fast.TTL)), time.Now(),
			"the term ends when the trust window closes, not when the store returns")
		require.ErrorIs(t, term.Err(), elector.ErrLeaseExpired)

		// Resign bounded by a short context while the renewal still hangs.
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, term.Resign(ctx), context.DeadlineExceeded)
		s.renewDelay.Store(0)
		require.NoError(t, term.Resign(t.Context()), "a later Resign frees the lease")
	})
}

// stuckStore's Renew hangs until its context ends, the first stuck times,
// as on a connection that died.
type stuckStore struct {
	countingStore
	stuck atomic.Int64
}

func (s *stuckStore) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	if s.stuck.Add(-1) >= 0 {
		<-ctx.Done()
		return elector.Lease{}, ctx.Err()
	}
	return s.countingStore.Renew(ctx, l, ttl)
}

func TestStuckRenewalLeavesTimeToRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &stuckStore{countingStore: countingStore{Store: elector.NewMemoryStore()}}
		s.stuck.Store(1)
		term := campaign(t, newElector(t, s, "a", fast))
		time.Sleep(30 * time.Second)
		select {
		case <-term.Done():
			t.Fatalf("one renewal stuck until its deadline ended the term: %v", term.Err())
		default:
		}
		require.NoError(t, term.Resign(t.Context()))
	})
}

func TestTrustRemaining(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		term := campaign(t, newElector(t, elector.NewMemoryStore(), "a", fast))
		trust := term.(interface{ TrustRemaining() time.Duration })
		assert.Equal(t, 2700*time.Millisecond, trust.TrustRemaining())
		time.Sleep(500 * time.Millisecond)
		assert.Equal(t, 2200*time.Millisecond, trust.TrustRemaining())
		time.Sleep(fast.RenewInterval) // renewed at 1s
		synctest.Wait()
		assert.Equal(t, 2200*time.Millisecond, trust.TrustRemaining())
		require.NoError(t, term.Resign(t.Context()))
		assert.Zero(t, trust.TrustRemaining())
	})
}

// TestTrustRemainingEndsTermAfterSuspend: after a suspend, asking the term
// for its trust ends it at once, before the renewal timer (which a suspend
// delays) fires.
func TestTrustRemainingEndsTermAfterSuspend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := stepclock.New()
		term := campaign(t, newElector(t, elector.NewMemoryStoreOn(c), "a", fast))
		c.Suspend(time.Hour)
		assert.Zero(t, term.(interface{ TrustRemaining() time.Duration }).TrustRemaining())
		select {
		case <-term.Done():
		default:
			t.Fatal("the term is still open after its trust window closed during a suspend")
		}
		require.ErrorIs(t, term.Err(), elector.ErrLeaseExpired)
		require.NoError(t, term.Resign(t.Context()))
	})
}

// bulkCounting counts calls and passes the memory store's BulkReader and
// Notifier through, as a wrapper should.
type bulkCounting struct {
	countingStore
	elector.BulkReader
	elector.Notifier
}

func TestBulkWatchingCandidateMakesNoCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := elector.NewMemoryStore()
		s := &bulkCounting{countingStore: countingStore{Store: mem}, BulkReader: mem, Notifier: mem}
		ta := campaign(t, newElector(t, mem, "a", fast))
		won := make(chan elector.Term)
		go func() {
			tb, err := newElector(t, s, "b", fast).Campaign(t.Context())
			assert.NoError(t, err)
			won <- tb
		}()
		time.Sleep(time.Minute) // the holder renews 60 times
		synctest.Wait()
		assert.EqualValues(t, 1, s.acquires.Load(), "a candidate watching in bulk reads nothing itself while the holder renews")
		ta.Abandon() // renewals stop: as good as a crash
		lastRenewal := time.Now()
		tb := <-won
		assert.Equal(t, fast.TTL, time.Since(lastRenewal), "taken over the moment the watch of the last renewal completes")
		assert.EqualValues(t, 2, s.acquires.Load(), "one more call: the takeover")
		require.NoError(t, tb.Resign(t.Context()))
	})
}

func TestBulkWatchingCandidateTakesReleasedLeaseAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := elector.NewMemoryStore()
		ta := campaign(t, newElector(t, mem, "a", fast))
		won := make(chan elector.Term)
		go func() {
			tb, err := newElector(t, mem, "b", fast).Campaign(t.Context())
			assert.NoError(t, err)
			won <- tb
		}()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		released := time.Now()
		require.NoError(t, ta.Resign(t.Context()))
		tb := <-won
		assert.Zero(t, time.Since(released))
		require.NoError(t, tb.Resign(t.Context()))
	})
}
