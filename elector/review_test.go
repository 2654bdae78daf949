package elector_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/clock"
	"github.com/leaderaware/leaderaware/internal/testing/rollbacktest"
	"github.com/leaderaware/leaderaware/internal/testing/stepclock"
)

// uncomparableStore is a Store value that is no map key.
type uncomparableStore struct {
	elector.Store
	_ func()
}

// Clock passes on the Store's clock.
func (s uncomparableStore) Clock() clock.Clock { return clock.Of(s.Store) }

// TestResumeWatchOfUncomparableStore: a Store value that cannot be a map key
// still gets its terms ended on a resume, and leaves no goroutine.
func TestResumeWatchOfUncomparableStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := stepclock.New()
		s := uncomparableStore{Store: elector.NewMemoryStoreOn(c)}
		term := campaignCfg(t, s, elector.Config{})
		time.Sleep(time.Second)
		requireEndsOnLongSuspend(t, c, term)
	})
}

// TestResumeWatchChurn: terms of one Store that start and end while others
// hold, across suspends, each end on a long suspend, and the watch ends
// with the last of them.
func TestResumeWatchChurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := stepclock.New()
		s := elector.NewMemoryStoreOn(c)
		var wg sync.WaitGroup
		for i := range 20 {
			e, err := elector.New(s, "job"+string(rune('a'+i)), fast)
			require.NoError(t, err)
			wg.Go(func() {
				for range 10 {
					term := campaign(t, e)
					time.Sleep(time.Duration(i) * 10 * time.Millisecond)
					assert.NoError(t, term.Resign(context.Background()))
				}
			})
		}
		wg.Wait()
		synctest.Wait()
		assert.Zero(t, goroutinesIn(resumeWatch), "after the last Resign")
		term := campaign(t, newElector(t, s, "late", fast))
		time.Sleep(fast.RenewInterval / 2) // the schedule waits for its renewal
		requireEndsOnLongSuspend(t, c, term)
		term.Abandon()
		synctest.Wait()
		assert.Zero(t, goroutinesIn(resumeWatch), "after Abandon")
	})
}

// TestSuspendDuringCampaignNoEarlyTakeover: a candidate whose machine
// suspends past the holder's TTL takes the lease only once the holder's
// term, on the same machine, has ended.
func TestSuspendDuringCampaignNoEarlyTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := stepclock.New()
		s := elector.NewMemoryStoreOn(c)
		ta := campaign(t, newElector(t, s, "a", fast))
		won, stop := rollbacktest.CampaignAsync(t, newElector(t, s, "b", fast))
		defer stop()
		time.Sleep(1500 * time.Millisecond)
		c.Suspend(time.Minute)
		tb := <-won
		select {
		case <-ta.Done():
		default:
			t.Fatal("two leaders: b won while a's term was open")
		}
		require.NoError(t, tb.Resign(t.Context()))
		ta.Abandon()
	})
}

// lateStore is a memory store whose Notify can push a state late, as a
// bulk read that was in flight during a write hands it.
type lateStore struct {
	*elector.MemoryStore
	late chan elector.Lease // each value goes to one callback
}

func (s *lateStore) Notify(changed func(elector.Change)) func() {
	stopIn := s.MemoryStore.Notify(changed)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case l := <-s.late:
				changed(elector.Change{Name: l.Name, State: l, Known: true})
			case <-quit:
				return
			}
		}
	}()
	return func() { stopIn(); close(quit); <-done }
}

// TestRollbackWithLateDeliveryMakesNoSecondLeader: a row rolled back a few
// versions while its holder lives, and the state from before the rollback
// handed to the candidate again just after it, do not let the candidate
// take the lease when a renewal writes that version again.
func TestRollbackWithLateDeliveryMakesNoSecondLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &lateStore{MemoryStore: elector.NewMemoryStore(), late: make(chan elector.Lease)}
		ta := campaign(t, newElector(t, s, "a", rollbackTimings))
		won, stop := rollbacktest.CampaignAsync(t, newElector(t, s, "b", rollbackTimings))
		defer stop()
		time.Sleep(5500 * time.Millisecond)
		before, err := s.Get(t.Context(), "job")
		require.NoError(t, err)
		l := before
		l.Version -= 4
		s.Restore(l)
		time.Sleep(time.Millisecond)
		s.late <- before
		select {
		case tb := <-won:
			assert.Zero(t, trustOf(ta), "two leaders: b took the lease while a still renewed it")
			require.NoError(t, tb.Resign(t.Context()))
		case <-time.After(20 * time.Second):
		}
		require.NoError(t, ta.Resign(t.Context()))
	})
}

// TestRolledBackLeaseWithLateDeliveryIsTakenOver: a dead holder's row
// rolled back, with the state from before the rollback handed to the
// candidate late, once per TTL, is taken over: each late state restarts the
// watch, and the candidate's compare-and-set on it gets the current one.
func TestRolledBackLeaseWithLateDeliveryIsTakenOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &lateStore{MemoryStore: elector.NewMemoryStore(), late: make(chan elector.Lease)}
		old, err := s.TryAcquire(t.Context(), "job", "a", rollbackTimings.TTL, elector.Lease{})
		require.NoError(t, err)
		newer, err := s.Renew(t.Context(), old, rollbackTimings.TTL)
		require.NoError(t, err)
		won, stop := rollbacktest.CampaignAsync(t, newElector(t, s, "b", rollbackTimings))
		defer stop()
		time.Sleep(time.Second)
		s.Restore(old)
		start := time.Now()
		for range 3 {
			time.Sleep(rollbackTimings.TTL / 2)
			select {
			case s.late <- newer:
			case tb := <-won:
				assert.NoError(t, tb.Resign(t.Context()))
				t.Fatalf("b took the lease %v after the rollback, before the late states", time.Since(start))
			}
		}
		select {
		case tb := <-won:
			t.Logf("taken over %v after the rollback", time.Since(start))
			require.NoError(t, tb.Resign(t.Context()))
		case <-time.After(3 * rollbackTimings.TTL):
			t.Fatal("b never took the rolled-back lease of a dead holder")
		}
	})
}
