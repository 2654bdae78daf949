package elector_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/rollbacktest"
)

// TestHungRenewalOfSlowTermDelaysNoFastTerm: a hung Renew of a term with a
// long RenewInterval (its call is bounded by 10s) does not hold back the
// renewal of a term of the same Store with a short one. The schedule starts
// a worker only while the queue is longer than the workers it has, busy
// ones included, so the fast term's renewal waits for the hung call and its
// trust window closes on a healthy store.
func TestHungRenewalOfSlowTermDelaysNoFastTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &hangingStore{Store: elector.NewMemoryStore(), hang: map[string]bool{"slow": true, "fast": false}}
		slowCfg := elector.Config{TTL: 30 * time.Second, RenewInterval: 10 * time.Second, RetryInterval: time.Second, Holder: "a"}
		es, err := elector.New(s, "slow", slowCfg)
		require.NoError(t, err)
		slow := campaign(t, es) // due at 10s; its Renew hangs 10s–20s
		defer slow.Abandon()
		time.Sleep(9500 * time.Millisecond)
		fastCfg := fast
		fastCfg.Holder = "a"
		ef, err := elector.New(s, "fast", fastCfg)
		require.NoError(t, err)
		quick := campaign(t, ef) // due at 10.5s, trusted until 12.2s
		defer func() { assert.NoError(t, quick.Resign(context.Background())) }()
		time.Sleep(5 * time.Second)
		assert.NoError(t, quick.Err(), "the healthy term ended while another term's renewal hung")
		assert.Greater(t, quick.Lease().Version, uint64(3), "the healthy term renewed every second")
	})
}

// heldHook is a memory store without Notifier (its watch polls) whose
// TryAcquire runs hook first, once, on its nth call.
type heldHook struct {
	elector.Store
	elector.BulkReader
	n     int64
	calls atomic.Int64
	hook  func()
}

func (s *heldHook) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	if s.calls.Add(1) == s.n {
		s.hook()
	}
	return s.Store.TryAcquire(ctx, name, holder, ttl, observed)
}

// TestStateQueuedBeforeErrHeldDoesNotRestartTheWatch: a state the watch
// handed the candidate while its compare-and-set was in flight, older than
// the state that compare-and-set was refused with, does not restart the
// candidate's watch once more: a holder that dies right after is taken
// over TTL (plus one poll) after its last renewal, not two TTLs.
func TestStateQueuedBeforeErrHeldDoesNotRestartTheWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := elector.NewMemoryStore()
		cfg := elector.Config{TTL: 3 * time.Second, RenewInterval: time.Second, RetryInterval: 500 * time.Millisecond, Holder: "b"}
		l, err := mem.TryAcquire(t.Context(), "job", "a", cfg.TTL, elector.Lease{})
		require.NoError(t, err)
		var last time.Time
		s := &heldHook{Store: mem, BulkReader: mem, n: 2, hook: func() {
			// The watch of the first state is complete; while this
			// compare-and-set is on its way, a renews twice, and the
			// watch polls between the two renewals.
			l2, err := mem.Renew(context.Background(), l, cfg.TTL)
			assert.NoError(t, err)
			time.Sleep(2 * cfg.RetryInterval)
			_, err = mem.Renew(context.Background(), l2, cfg.TTL) // then a dies
			assert.NoError(t, err)
			last = time.Now()
		}}
		e, err := elector.New(s, "job", cfg)
		require.NoError(t, err)
		won, stop := rollbacktest.CampaignAsync(t, e)
		defer stop()
		tb := <-won
		assert.LessOrEqual(t, time.Since(last), cfg.TTL+cfg.RetryInterval, "taken over TTL after a's last renewal")
		require.NoError(t, tb.Resign(t.Context()))
	})
}

// slowReads is a memory store without Notifier whose GetMany takes delay.
type slowReads struct {
	elector.Store
	mem   *elector.MemoryStore
	delay time.Duration
}

func (s *slowReads) GetMany(ctx context.Context, names []string) ([]elector.Lease, error) {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.mem.GetMany(ctx, names)
}

// TestReadSlowerThanRetryIntervalStillWatches: a Store whose bulk read
// takes 20ms still tells a candidate with a 10ms RetryInterval of a
// release within a few reads. The watch bounds each read by the least
// RetryInterval of its subscribers, so every read is given up and the
// release is found only when the candidate's own watch of the TTL ends.
func TestReadSlowerThanRetryIntervalStillWatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := elector.NewMemoryStore()
		cfg := elector.Config{TTL: 3 * time.Second, RenewInterval: time.Second, RetryInterval: 10 * time.Millisecond, Holder: "a"}
		ea, err := elector.New(mem, "job", cfg)
		require.NoError(t, err)
		ta := campaign(t, ea)
		cfg.Holder = "b"
		eb, err := elector.New(&slowReads{Store: mem, mem: mem, delay: 20 * time.Millisecond}, "job", cfg)
		require.NoError(t, err)
		won, stop := rollbacktest.CampaignAsync(t, eb)
		defer stop()
		time.Sleep(500 * time.Millisecond)
		require.NoError(t, ta.Resign(t.Context()))
		released := time.Now()
		tb := <-won
		assert.Less(t, time.Since(released), 200*time.Millisecond, "a release found by the watch's reads")
		require.NoError(t, tb.Resign(t.Context()))
	})
}

// swappingRenewer is a memory store whose RenewMany returns its results in
// reverse order: a store bug (an UPDATE ... RETURNING read back by row
// order, not by name) that the schedule would apply to the wrong terms.
type swappingRenewer struct{ *elector.MemoryStore }

func (s swappingRenewer) RenewMany(ctx context.Context, terms []elector.Lease) ([]elector.Lease, error) {
	got, err := s.MemoryStore.RenewMany(ctx, terms)
	for i, j := 0, len(got)-1; i < j; i, j = i+1, j-1 {
		got[i], got[j] = got[j], got[i]
	}
	return got, err
}

// TestRenewManyResultOfAnotherLeaseRenewsNoTerm: a RenewMany result whose
// name or token is not the term's does not renew that term. Otherwise a
// term whose lease was taken over is trusted on, by another lease's
// renewal, while the new holder leads: two leaders.
func TestRenewManyResultOfAnotherLeaseRenewsNoTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := elector.NewMemoryStore()
		s := swappingRenewer{mem}
		cfg := fast
		cfg.Holder = "x"
		ea, err := elector.New(s, "a", cfg)
		require.NoError(t, err)
		eb, err := elector.New(s, "b", cfg)
		require.NoError(t, err)
		ta, tb := campaign(t, ea), campaign(t, eb) // renewed together, in one RenewMany
		defer ta.Abandon()
		defer tb.Abandon()
		time.Sleep(100 * time.Millisecond)
		// a's lease is released and taken by y behind x's back.
		require.NoError(t, mem.Release(t.Context(), ta.Lease()))
		ly, err := mem.TryAcquire(t.Context(), "a", "y", cfg.TTL, elector.Lease{})
		require.NoError(t, err)
		time.Sleep(cfg.TTL)
		cur, err := mem.Get(t.Context(), "a")
		require.NoError(t, err)
		require.Equal(t, ly.Token, cur.Token, "y holds a")
		assert.Zero(t, trustOf(ta), "two leaders: x trusts its term of a, renewed by b's result, while y holds a")
		assert.Equal(t, "a", ta.Lease().Name, "the term of a carries another lease")
	})
}

// rollbackHangs is a fenced transaction whose Rollback returns only when
// its context ends or the test lets it go.
type rollbackHangs struct{ release chan struct{} }

func (rollbackHangs) Held(context.Context, elector.Lease) error { return nil }
func (rollbackHangs) Commit(context.Context) error              { return nil }
func (tx rollbackHangs) Rollback(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tx.release:
		return nil
	}
}

// TestFenceRollbackHasADeadline: Fence bounds the Rollback of a write it
// refuses (or fn failed), as every store call is bounded: a Rollback on a
// dead connection does not hang the job's fenced write forever. Fence
// hands Rollback a context without a deadline.
func TestFenceRollbackHasADeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		term := campaign(t, newElector(t, elector.NewMemoryStore(), "a", fast))
		defer term.Abandon()
		tx := rollbackHangs{release: make(chan struct{})}
		done := make(chan error, 1)
		go func() {
			done <- elector.Fence(elector.ContextWithTerm(t.Context(), term),
				func(context.Context, elector.Lease, time.Duration) (rollbackHangs, error) { return tx, nil },
				func(context.Context, rollbackHangs) error { return context.Canceled })
		}()
		select {
		case err := <-done:
			assert.ErrorIs(t, err, context.Canceled)
		case <-time.After(time.Minute):
			t.Error("Fence still waits for its Rollback a minute later")
			close(tx.release)
			<-done
		}
	})
}

// TestCampaignReturnsAtOnceWhenCanceled: a Campaign whose ctx ends returns
// at once, even while the watch's read of its lease hangs. Campaign's
// last leave of the Store's runtime waits for the watch's goroutine, which
// waits for the read's own deadline (the RetryInterval, here 2s): an app's
// Stop waits that long.
func TestCampaignReturnsAtOnceWhenCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := elector.NewMemoryStore()
		ta := campaign(t, newElector(t, mem, "a", fast))
		defer ta.Abandon()
		eb := newElector(t, &stuckReads{Store: mem, mem: mem}, "b", fast)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, err := eb.Campaign(ctx)
			assert.ErrorIs(t, err, context.Canceled)
		}()
		time.Sleep(time.Millisecond) // b waits, its first read hangs
		cancel()
		canceled := time.Now()
		<-done
		assert.Less(t, time.Since(canceled), 10*time.Millisecond, "Campaign returned late")
	})
}

// polled is a memory store without Notifier: its watch learns of writes
// only by reading, every RetryInterval.
type polled struct {
	elector.Store
	elector.BulkReader
}

// TestRollbackToTheWatchedStateMakesNoSecondLeader: a candidate that saw
// state X, and read nothing since (its RetryInterval is longer than the
// TTL), does not take the lease over when the row is rolled back to X
// (a failover to a standby that lagged) after the holder renewed it
// twice: the holder still trusts its last renewal. The watch counts from
// the first sight of X, as if X had stood ever since.
func TestRollbackToTheWatchedStateMakesNoSecondLeader(t *testing.T) {
	cfg := fast
	cfg.RetryInterval = 10 * time.Second
	rollbackToX(t, func(mem *elector.MemoryStore) elector.Store { return polled{mem, mem} }, cfg, func(restore func()) {
		time.Sleep(2700 * time.Millisecond) // a renewed at 3s
		restore()                           // at 3.2s; b's watch of X ends at 3.5s
	})
}

// rollbackToX runs a, with the fast Config, from 0s, and b, through the
// Store that store makes of a's, from 0.5s (it watches X, a's first state),
// runs during (which rolls the row back to X by calling restore), and fails
// if b wins, within a TTL, while a still trusts its term.
func rollbackToX(t *testing.T, store func(*elector.MemoryStore) elector.Store, cfg elector.Config, during func(restore func())) {
	synctest.Test(t, func(t *testing.T) {
		mem := elector.NewMemoryStore()
		ta := campaign(t, newElector(t, mem, "a", fast)) // renews at 1s, 2s, 3s, ...
		defer ta.Abandon()
		x := ta.Lease()
		time.Sleep(500 * time.Millisecond)
		won, stop := rollbacktest.CampaignAsync(t, newElector(t, store(mem), "b", cfg))
		defer stop()
		during(func() { mem.Restore(x) })
		select {
		case tb := <-won:
			assert.Zero(t, trustOf(ta), "two leaders: b took the lease over while a trusts its renewal of 3s")
			require.NoError(t, tb.Resign(t.Context()))
		case <-time.After(fast.TTL):
		}
		assert.NoError(t, ta.Err(), "a renews the rolled-back row")
	})
}

// TestSixteenHungSlowRenewalsDelayNoFastTerm: sixteen hung renewals of
// terms with a long RenewInterval (each bounded by 10s) fill every worker
// of the Store's schedule; a term with a 1s RenewInterval on the same
// Store, whose own renewal would succeed, waits for a worker past its
// trust window. Each call should be bounded by what the terms waiting
// behind it can afford.
func TestSixteenHungSlowRenewalsDelayNoFastTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &hangingStore{Store: elector.NewMemoryStore(), hang: map[string]bool{"fast": false}}
		slowCfg := elector.Config{TTL: 30 * time.Second, RenewInterval: 10 * time.Second, RetryInterval: time.Second, Holder: "a"}
		for i := range 16 {
			name := fmt.Sprintf("slow/%d", i)
			s.hang[name] = true
			e, err := elector.New(s, name, slowCfg)
			require.NoError(t, err)
			term := campaign(t, e) // due at 10s; its Renew hangs 10s–20s
			defer term.Abandon()
		}
		time.Sleep(9500 * time.Millisecond)
		fastCfg := fast
		fastCfg.Holder = "a"
		ef, err := elector.New(s, "fast", fastCfg)
		require.NoError(t, err)
		quick := campaign(t, ef) // due at 10.5s, trusted until 12.2s
		defer func() { assert.NoError(t, quick.Resign(context.Background())) }()
		time.Sleep(5 * time.Second)
		assert.NoError(t, quick.Err(), "the healthy term ended while other terms' renewals hung")
	})
}

// failingReads is a memory store without Notifier whose GetMany fails
// while fail is set.
type failingReads struct {
	elector.Store
	mem  *elector.MemoryStore
	fail atomic.Bool
}

func (s *failingReads) GetMany(ctx context.Context, names []string) ([]elector.Lease, error) {
	if s.fail.Load() {
		return nil, errors.New("connection refused")
	}
	return s.mem.GetMany(ctx, names)
}

// TestRollbackInsideAGapOfReadsMakesNoSecondLeader: a candidate whose
// reads fail from just after it saw X until just after the row is rolled
// back to X (after the holder renewed it three times), or fail on, does not
// count its watch of X from before the failures: the first read after the
// gap, or the end of the watch with no read, starts it again, and the
// holder's next renewal shows before the watch completes.
func TestRollbackInsideAGapOfReadsMakesNoSecondLeader(t *testing.T) {
	for _, resume := range []bool{true, false} {
		t.Run(fmt.Sprintf("resume=%v", resume), func(t *testing.T) { testRollbackInsideAGap(t, resume) })
	}
}

func testRollbackInsideAGap(t *testing.T, resume bool) {
	var s *failingReads
	rollbackToX(t, func(mem *elector.MemoryStore) elector.Store {
		s = &failingReads{Store: mem, mem: mem}
		return s
	}, fast, func(restore func()) {
		time.Sleep(100 * time.Millisecond) // b read X once
		s.fail.Store(true)
		time.Sleep(2600 * time.Millisecond) // a renewed at 1s, 2s, 3s; b read none
		restore()                           // at 3.2s; b's watch of X ends at 3.5s
		time.Sleep(100 * time.Millisecond)
		s.fail.Store(!resume) // b reads X again, or not
	})
}
