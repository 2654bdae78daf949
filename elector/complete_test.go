package elector_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/rollbacktest"
)

// TestSyncsStandInForReads: a candidate on a CompleteNotifier (the memory
// store) reads its lease every RetryInterval, not every TTL/20, while the
// holder renews; it still takes the lease over one TTL after the last
// renewal once the holder stops.
func TestSyncsStandInForReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := elector.NewMemoryStore()
		ta := campaign(t, newElector(t, mem, "a", fast))
		p := &peer{MemoryStore: mem}
		won, stop := rollbacktest.CampaignAsync(t, newElector(t, p, "b", fast))
		defer stop()
		time.Sleep(time.Second)
		reads0 := p.getMany.Load()
		const window = 20 * time.Second
		time.Sleep(window)
		reads := p.getMany.Load() - reads0
		// Polls every RetryInterval, jittered to half; every TTL/20 would
		// be at least window/(TTL/20) = 133.
		assert.LessOrEqual(t, reads, int64(window/(fast.RetryInterval/2))+1, "reads while the holder renews")
		assert.GreaterOrEqual(t, reads, int64(window/fast.RetryInterval)-1, "reads while the holder renews")
		select {
		case <-won:
			t.Fatal("b took the lease over while a renewed it")
		default:
		}

		last := ta.Lease()
		ta.Abandon()
		abandoned := time.Now()
		select {
		case tb := <-won:
			took := time.Since(abandoned)
			assert.GreaterOrEqual(t, took, fast.TTL-fast.RenewInterval, "taken over before a TTL after the last renewal")
			assert.LessOrEqual(t, took, fast.TTL+elector.SafetyMargin(fast.TTL), "taken over late")
			assert.Greater(t, tb.Token(), last.Token)
			require.NoError(t, tb.Resign(t.Context()))
		case <-time.After(2 * fast.TTL):
			t.Fatal("b did not take over the abandoned lease")
		}
	})
}

// missingStore is a memory store whose pushes stop while deaf (its Sync then
// fails, as a CompleteNotifier's must), and whose reads fail while blind.
// hear ends a deaf spell as a store's reconnect does: it pushes a Change
// with Name "".
type missingStore struct {
	*elector.MemoryStore
	deaf, blind atomic.Bool

	mu      sync.Mutex
	changed map[*func(elector.Change)]struct{}
}

func (s *missingStore) Notify(changed func(elector.Change)) func() {
	s.mu.Lock()
	f := &changed
	s.changed[f] = struct{}{}
	s.mu.Unlock()
	stop := s.MemoryStore.Notify(func(c elector.Change) {
		if !s.deaf.Load() {
			changed(c)
		}
	})
	return func() {
		stop()
		s.mu.Lock()
		delete(s.changed, f)
		s.mu.Unlock()
	}
}

func (s *missingStore) Sync(ctx context.Context) error {
	if s.deaf.Load() {
		return errors.New("listener reconnecting")
	}
	return s.MemoryStore.Sync(ctx)
}

func (s *missingStore) GetMany(ctx context.Context, names []string) ([]elector.Lease, error) {
	if s.blind.Load() {
		return nil, errors.New("connection refused")
	}
	return s.MemoryStore.GetMany(ctx, names)
}

func (s *missingStore) hear() {
	s.deaf.Store(false)
	s.mu.Lock()
	defer s.mu.Unlock()
	for f := range s.changed {
		(*f)(elector.Change{})
	}
}

// TestMissedPushesMakeNoSecondLeader: a candidate on a CompleteNotifier
// that watches X, with a 10s RetryInterval, misses the holder's renewals
// and the rollback of the row to X: its pushes stop (and its Syncs fail)
// and its reads fail. When the pushes resume, with a Change that says so,
// its reads fail a while longer, while its Syncs succeed. Neither the
// failed Syncs nor those after the miss may count as reads: the candidate
// must not take the lease over while the holder trusts its renewal of 3s.
func TestMissedPushesMakeNoSecondLeader(t *testing.T) {
	cfg := fast
	cfg.RetryInterval = 10 * time.Second
	for _, tt := range []struct {
		name       string
		restoredAt time.Duration // the rollback to X, while pushes stop
		heardAt    time.Duration // pushes resume; reads fail 400ms longer
	}{
		{"resumed before the watch ends", 3200 * time.Millisecond, 3200 * time.Millisecond},
		{"resumed after the watch ends", 3450 * time.Millisecond, 3600 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var s *missingStore
			rollbackToX(t, func(mem *elector.MemoryStore) elector.Store {
				s = &missingStore{MemoryStore: mem, changed: map[*func(elector.Change)]struct{}{}}
				return s
			}, cfg, func(restore func()) {
				start := time.Now().Add(-500 * time.Millisecond) // a's start
				time.Sleep(100 * time.Millisecond)               // b watches X, from 0.5s to 3.5s
				s.deaf.Store(true)
				s.blind.Store(true)
				time.Sleep(time.Until(start.Add(tt.restoredAt))) // a renewed at 1s, 2s, 3s
				restore()
				time.Sleep(time.Until(start.Add(tt.heardAt)))
				s.hear()
				time.Sleep(400 * time.Millisecond)
				s.blind.Store(false)
			})
		})
	}
}
