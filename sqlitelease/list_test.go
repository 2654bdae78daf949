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

// TestList lists live and free leases in name order, with the last term of
// a free one, as another Store on the same file (another process) sees them.
func TestList(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "leases.db")
	s := openPath(t, path)
	other := openPath(t, path)

	got, err := other.List(ctx)
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.NotNil(t, got)

	b, err := s.TryAcquire(ctx, "b-job", "holder-1", time.Minute)
	require.NoError(t, err)
	a, err := s.TryAcquire(ctx, "a-job", "holder-2", time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, a))
	released := time.Now()

	got, err = other.List(ctx)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "a-job", got[0].Name, "name order")
	assert.Equal(t, "holder-2", got[0].Holder, "a free lease keeps its last holder")
	assert.Equal(t, a.Token, got[0].Token)
	assert.False(t, got[0].ExpiresAt.After(released), "a released lease has expired: %v", got[0].ExpiresAt)
	assert.Equal(t, elector.Lease{Name: "b-job", Holder: "holder-1", Token: b.Token, ExpiresAt: b.ExpiresAt}, got[1])

	a2, err := other.TryAcquire(ctx, "a-job", "holder-3", time.Minute)
	require.NoError(t, err)
	got, err = s.List(ctx)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "holder-3", got[0].Holder)
	assert.Greater(t, got[0].Token, a.Token)
	assert.Equal(t, a2.Token, got[0].Token)
	assert.True(t, got[0].ExpiresAt.After(time.Now()), "the new term is live")
}

func TestListAfterClose(t *testing.T) {
	s, err := sqlitelease.Open(filepath.Join(t.TempDir(), "leases.db"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = s.List(context.Background())
	assert.ErrorIs(t, err, sqlitelease.ErrClosed)
}
