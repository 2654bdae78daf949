package elector_test

import (
	"context"
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
