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
	"github.com/leaderaware/leaderaware/internal/rollbacktest"
)

// uncomparableStore is a Store value that is no map key.
type uncomparableStore struct {
	elector.Store
	_ func()
}

// TestResumeWatchOfUncomparableStore: a Store value that cannot be a map key
// still gets its terms ended on a resume, and leaves no goroutine.
func TestResumeWatchOfUncomparableStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := uncomparableStore{Store: elector.NewMemoryStore()}
		term := campaignCfg(t, s, elector.Config{})
		time.Sleep(time.Second)
		requireEndsOnLongSuspend(t, term)
	})
}

// TestResumeWatchChurn: terms of one Store that start and end while others
// hold, across suspends, each end on a long suspend, and the watch ends
// with the last of them.
func TestResumeWatchChurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := elector.NewMemoryStore()
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
		assert.Zero(t, goroutinesIn("elector.(*resumeWatch).run("), "after the last Resign")
		term := campaign(t, newElector(t, s, "late", fast))
		requireEndsOnLongSuspend(t, term)
		term.Abandon()
		synctest.Wait()
		assert.Zero(t, goroutinesIn("elector.(*resumeWatch).run("), "after Abandon")
	})
}

// TestSuspendDuringCampaignNoEarlyTakeover: a candidate whose machine
// suspends past the holder's TTL takes the lease only once the holder's
// term, on the same machine, has ended.
func TestSuspendDuringCampaignNoEarlyTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := elector.NewMemoryStore()
		ta := campaign(t, newElector(t, s, "a", fast))
		won, stop := rollbacktest.CampaignAsync(t, newElector(t, s, "b", fast))
		defer stop()
		time.Sleep(1500 * time.Millisecond)
		suspend(t, time.Minute)
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
