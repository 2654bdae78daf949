package elector_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// TestRollbackBetweenCampaignsMakesNoSecondLeader: the watch kept across
// calls to Campaign has no reads while no Campaign runs, a gap; a row rolled
// back to the state it watched while its holder lives must not be taken by
// the next Campaign's compare-and-set on that state.
func TestRollbackBetweenCampaignsMakesNoSecondLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := elector.NewMemoryStore()
		ta := campaign(t, newElector(t, s, "a", rollbackTimings))
		b := newElector(t, s, "b", rollbackTimings)
		ctx, cancel := context.WithTimeout(t.Context(), 5500*time.Millisecond)
		_, err := b.Campaign(ctx) // watches the renewal of 5s when it returns
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		watched, err := s.Get(t.Context(), "job")
		require.NoError(t, err)
		time.Sleep(3700 * time.Millisecond) // a renews at 6s ... 9s
		s.Restore(watched)                  // a failover to a standby that lagged
		ctx, cancel = context.WithTimeout(t.Context(), 100*time.Millisecond)
		tb, err := b.Campaign(ctx)
		cancel()
		if err == nil {
			assert.Zero(t, ta.(interface{ TrustRemaining() time.Duration }).TrustRemaining(), "two leaders: b took the lease while a still renewed it")
			require.NoError(t, tb.Resign(t.Context()))
		}
		require.NoError(t, ta.Resign(t.Context()))
	})
}

// holdPlacer holds every attempt back for hold and never yields.
type holdPlacer struct{ hold time.Duration }

func (p holdPlacer) Hold(string) time.Duration                 { return p.hold }
func (p holdPlacer) Lead(string, elector.Term) <-chan struct{} { return nil }

// TestRollbackDuringTheFirstHoldMakesNoSecondLeader: a Placer's hold before
// a Campaign's first attempt, up to the TTL, has no reads of the watch kept
// from an earlier Campaign; a rollback to its state then must not be taken.
func TestRollbackDuringTheFirstHoldMakesNoSecondLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := elector.NewMemoryStore()
		ta := campaign(t, newElector(t, s, "a", rollbackTimings))
		cfg := rollbackTimings
		cfg.Placer = holdPlacer{rollbackTimings.TTL}
		b := newElector(t, s, "b", cfg)
		time.Sleep(500 * time.Millisecond)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second) // held until 3.5s, then watches
		_, err := b.Campaign(ctx)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		watched, err := s.Get(t.Context(), "job") // a's renewal of 5s, which b watches
		require.NoError(t, err)
		won := make(chan elector.Term, 1)
		ctx, cancel = context.WithTimeout(t.Context(), 3100*time.Millisecond)
		defer cancel()
		go func() {
			if tb, err := b.Campaign(ctx); err == nil {
				won <- tb
			}
			close(won)
		}()
		time.Sleep(2900 * time.Millisecond) // b holds until 8.5s; a renews at 6s ... 8s
		s.Restore(watched)
		if tb, ok := <-won; ok {
			assert.Zero(t, ta.(interface{ TrustRemaining() time.Duration }).TrustRemaining(), "two leaders: b took the lease while a still renewed it")
			require.NoError(t, tb.Resign(t.Context()))
		}
		require.NoError(t, ta.Resign(t.Context()))
	})
}

// TestStatesDuringAHoldRestartTheWatch: the states the watch hands over
// while a Placer holds an attempt back (a new term) count before the
// attempt; a rollback to the state whose watch completed before the hold
// must not be taken while the new term is trusted.
func TestStatesDuringAHoldRestartTheWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := elector.NewMemoryStore()
		ttl := rollbackTimings.TTL
		dead, err := s.TryAcquire(t.Context(), "job", "a", ttl, elector.Lease{}) // a dies holding it
		require.NoError(t, err)
		cfg := rollbackTimings
		cfg.Placer = holdPlacer{ttl}
		b := newElector(t, s, "b", cfg)
		won := make(chan elector.Term, 1)
		ctx, cancel := context.WithTimeout(t.Context(), 9500*time.Millisecond)
		defer cancel()
		go func() {
			if tb, err := b.Campaign(ctx); err == nil {
				won <- tb
			}
			close(won)
		}()
		time.Sleep(7 * time.Second)                                // b: held to 3s, watches a's term to 6s, held to 9s
		c, err := s.TryAcquire(t.Context(), "job", "c", ttl, dead) // c takes a's lease over
		require.NoError(t, err)
		trusted := time.Now().Add(ttl - elector.SafetyMargin(ttl))
		time.Sleep(time.Second)
		s.Restore(dead) // a failover to a standby that lagged: c's term is lost, c trusts it until its next renewal
		if tb, ok := <-won; ok {
			assert.False(t, time.Now().Before(trusted), "two leaders: b took a's rolled-back lease while c trusted its term of token %d", c.Token)
			require.NoError(t, tb.Resign(t.Context()))
		}
	})
}
