package pglease

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/elector/electortest"
)

// TestStore runs the elector.Store conformance suite. Each run gets a fresh
// schema: electortest's lease names are unique per process, not per call, so
// with -count=2 the second run would find the first run's leases.
func TestStore(t *testing.T) {
	schema := freshSchema(t)
	electortest.TestStore(t, func(t *testing.T) elector.Store {
		return openStore(t, WithSchema(schema))
	})
}

// TestStoreDefaultTable proves that a store with no options works on
// public.leaderaware_leases and names its backends "leaderaware".
func TestStoreDefaultTable(t *testing.T) {
	s := openStore(t)
	assert.Equal(t, `"public"."leaderaware_leases"`, s.Table())
	name := unique("pglease-default-")
	l, err := s.TryAcquire(testCtx(t), name, "a", time.Minute)
	require.NoError(t, err)
	var app string
	require.NoError(t, s.Pool().QueryRow(testCtx(t), "SELECT current_setting('application_name')").Scan(&app))
	assert.Equal(t, DefaultApplicationName, app)
	require.NoError(t, s.Release(testCtx(t), l))
}
