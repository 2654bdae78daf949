package elector_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/rollbacktest"
)

// plainStore is a memory store with neither Notifier nor BulkReader, as
// mysqllease has no push source: its watch learns only by polling.
type plainStore struct{ elector.Store }

// TestResignTellsTheSameStoresCandidates: a term resigned through the core
// frees its lease for the candidates of the same Store instance at once,
// without a Notifier and without waiting for the watch's next poll.
func TestResignTellsTheSameStoresCandidates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &plainStore{elector.NewMemoryStore()}
		ta, err := newElectorFor(t, s, "job", "a").Campaign(t.Context())
		require.NoError(t, err)
		won, stop := rollbacktest.CampaignAsync(t, newElectorFor(t, s, "job", "b"))
		defer stop()
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		require.NoError(t, ta.Resign(t.Context()))
		resigned := time.Now()
		tb := <-won
		assert.Less(t, time.Since(resigned), time.Millisecond, "taken over at once, not at the next poll")
		assert.Greater(t, tb.Token(), ta.Token())
		require.NoError(t, tb.Resign(t.Context()))
	})
}
