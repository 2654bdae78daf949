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
