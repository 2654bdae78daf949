package fxmodule_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/fxmodule"
	"github.com/leaderaware/leaderaware/internal/layers"
)

// TestNewLeaderJobWithoutFx uses the constructors behind the module
// directly: NewSQLiteStore with a nil lifecycle and NewLeaderJob.
func TestNewLeaderJobWithoutFx(t *testing.T) {
	ctx := context.Background()
	store, err := fxmodule.NewSQLiteStore(nil, dbPath(t))
	require.NoError(t, err)
	defer func() { require.NoError(t, store.Close()) }()

	inner := newCountingJob(nil)
	var job testJob
	job, err = fxmodule.NewLeaderJob[testJob](inner, store, "plain", fast)
	require.NoError(t, err)
	require.Equal(t, 1, layers.Depth(job))
	for range 3 {
		require.NoError(t, job.Start(ctx))
		require.Eventually(t, inner.running.Load, 5*time.Second, 5*time.Millisecond)
		l, err := store.Get(ctx, "plain")
		require.NoError(t, err)
		assert.NotEmpty(t, l.Holder)
		require.NoError(t, job.Stop(ctx))
		assert.False(t, inner.running.Load())
		assert.Equal(t, 1, layers.Depth(job))
	}
	assert.EqualValues(t, 3, inner.starts.Load())
}

func TestNewLeaderJobRefuses(t *testing.T) {
	mem := elector.NewMemoryStore()
	inner := newCountingJob(nil)
	t.Run("J", func(t *testing.T) {
		var got *countingJob
		var err error
		require.NotPanics(t, func() { got, err = fxmodule.NewLeaderJob(inner, mem, "job", fast) })
		assert.ErrorContains(t, err, "*fxmodule_test.countingJob")
		assert.Same(t, inner, got, "the job should come back unchanged")
	})
	t.Run("name", func(t *testing.T) {
		_, err := fxmodule.NewLeaderJob[testJob](inner, mem, "", fast)
		assert.ErrorContains(t, err, "lease name")
	})
	t.Run("config", func(t *testing.T) {
		_, err := fxmodule.NewLeaderJob[testJob](inner, mem, "job", elector.Config{TTL: time.Second, RenewInterval: time.Second})
		assert.ErrorContains(t, err, `"job"`)
		assert.ErrorContains(t, err, "RenewInterval 1s")
	})
	t.Run("nil store", func(t *testing.T) {
		_, err := fxmodule.NewLeaderJob[testJob](inner, nil, "job", fast)
		assert.ErrorContains(t, err, "nil Store")
	})
}

func TestNewSQLiteStoreRefusesPath(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-dir", "leases.db")
	_, err := fxmodule.NewSQLiteStore(nil, missing)
	assert.ErrorContains(t, err, missing)
}
