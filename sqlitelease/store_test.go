package sqlitelease_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/elector/electortest"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// open opens a store in a new file of t's temp dir and closes it at cleanup.
func open(t *testing.T, opts ...sqlitelease.Option) *sqlitelease.Store {
	t.Helper()
	return openPath(t, filepath.Join(t.TempDir(), "leases.db"), opts...)
}

// openPath opens a store on path and closes it at cleanup.
func openPath(t *testing.T, path string, opts ...sqlitelease.Option) *sqlitelease.Store {
	t.Helper()
	s, err := sqlitelease.Open(path, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func TestStore(t *testing.T) {
	electortest.TestStore(t, func(t *testing.T) elector.Store { return open(t) })
}

// TestHeldWithoutWriteLock asks for a held lease while another connection
// keeps the database's write lock (a long fenced write, say). A waiting
// candidate's call is a read: it must be answered at once, not wait for
// the lock until its deadline.
func TestHeldWithoutWriteLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	holder, candidate := openPath(t, path), openPath(t, path)
	l, err := holder.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)

	tx, err := holder.DB().BeginTx(bg(t), nil) // BEGIN IMMEDIATE: the write lock
	require.NoError(t, err)
	defer func() { require.NoError(t, tx.Rollback()) }()

	ctx, cancel := context.WithTimeout(bg(t), 5*time.Second)
	defer cancel()
	_, err = candidate.TryAcquire(ctx, "job", "b", time.Minute, elector.Lease{})
	var held *elector.HeldError
	require.ErrorAs(t, err, &held)
	require.Equal(t, l.Token, held.Lease.Token)
	got, err := candidate.Get(ctx, "job")
	require.NoError(t, err)
	require.Equal(t, l.Version, got.Version)
}
