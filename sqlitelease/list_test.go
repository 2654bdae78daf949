package sqlitelease_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// TestList lists held and released leases in name order, with the last term
// of a released one, as another Store on the same file (another process)
// sees them.
func TestList(t *testing.T) {
	ctx := bg(t)
	path := filepath.Join(t.TempDir(), "leases.db")
	s := openPath(t, path)
	other := openPath(t, path)

	got, err := other.List(ctx)
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.NotNil(t, got)

	b, err := s.TryAcquire(ctx, "b-job", "holder-1", time.Minute, elector.Lease{})
	require.NoError(t, err)
	a, err := s.TryAcquire(ctx, "a-job", "holder-2", 90*time.Second, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, a))

	got, err = other.List(ctx)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "a-job", got[0].Name, "name order")
	assert.True(t, got[0].Released)
	assert.Equal(t, "holder-2", got[0].Holder, "a released lease keeps its last holder")
	assert.Equal(t, a.Token, got[0].Token, "and its token")
	assert.Greater(t, got[0].Version, a.Version, "the release is a write")
	assert.Equal(t, 90*time.Second, got[0].TTL)
	assert.Equal(t, sqlitelease.LeaseRow{Lease: b}, got[1], "a held lease is listed as TryAcquire returned it")

	a2, err := other.TryAcquire(ctx, "a-job", "holder-3", time.Minute, elector.Lease{})
	require.NoError(t, err)
	got, err = s.List(ctx)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, sqlitelease.LeaseRow{Lease: a2}, got[0])
	assert.Greater(t, got[0].Token, a.Token)
}

func TestListAfterClose(t *testing.T) {
	s, err := sqlitelease.Open(filepath.Join(t.TempDir(), "leases.db"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = s.List(context.Background())
	assert.ErrorIs(t, err, sqlitelease.ErrClosed)
}
