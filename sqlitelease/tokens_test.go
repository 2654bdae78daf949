package sqlitelease_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/stepclock"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// acquireReleased takes the lease name for holder and releases it again,
// and returns the term.
func acquireReleased(t *testing.T, s *sqlitelease.Store, name, holder string) elector.Lease {
	t.Helper()
	l, err := s.TryAcquire(bg(t), name, holder, time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, s.Release(bg(t), l))
	return l
}

// TestTokensNeverGoBack checks that a new term's token exceeds every earlier
// one even after the store lost what it knew of them: each case defeats one
// of the two guards (the high-water mark in leaderaware_meta, and the floor
// at the wall clock in microseconds), and the other must hold.
func TestTokensNeverGoBack(t *testing.T) {
	t.Run("rows deleted", func(t *testing.T) {
		s := open(t)
		before := acquireReleased(t, s, "job", "a")
		_, err := s.DB().ExecContext(bg(t), `DELETE FROM leaderaware_lease`)
		require.NoError(t, err)
		after, err := s.TryAcquire(bg(t), "job", "b", time.Minute, elector.Lease{})
		require.NoError(t, err)
		assert.Greater(t, after.Token, before.Token)
	})
	t.Run("rows deleted, wall clock stepped back", func(t *testing.T) {
		// The clock floor is an hour behind: the high-water mark holds.
		c := stepclock.New()
		s := open(t, sqlitelease.WithClock(c))
		before := acquireReleased(t, s, "job", "a")
		_, err := s.DB().ExecContext(bg(t), `DELETE FROM leaderaware_lease`)
		require.NoError(t, err)
		c.Step(-time.Hour)
		after, err := s.TryAcquire(bg(t), "job", "b", time.Minute, elector.Lease{})
		require.NoError(t, err)
		assert.Greater(t, after.Token, before.Token)
	})
	t.Run("rows and high-water mark deleted", func(t *testing.T) {
		s := open(t)
		before := acquireReleased(t, s, "job", "a")
		_, err := s.DB().ExecContext(bg(t), `DELETE FROM leaderaware_lease`)
		require.NoError(t, err)
		_, err = s.DB().ExecContext(bg(t), `DELETE FROM leaderaware_meta WHERE key = 'token_high_water'`)
		require.NoError(t, err)
		after, err := s.TryAcquire(bg(t), "job", "b", time.Minute, elector.Lease{})
		require.NoError(t, err)
		assert.Greater(t, after.Token, before.Token)
	})
	t.Run("last commit rolled back", func(t *testing.T) {
		// A power cut under synchronous=NORMAL can forget the last commits;
		// restoring an older copy of the file does the same.
		path := filepath.Join(t.TempDir(), "leases.db")
		s, err := sqlitelease.Open(path)
		require.NoError(t, err)
		acquireReleased(t, s, "job", "a")
		require.NoError(t, s.Close()) // checkpoints the WAL into the file
		snapshot, err := os.ReadFile(path)
		require.NoError(t, err)

		s, err = sqlitelease.Open(path)
		require.NoError(t, err)
		lost := acquireReleased(t, s, "job", "b")
		require.NoError(t, s.Close())
		require.NoError(t, os.WriteFile(path, snapshot, 0o600))

		s = openPath(t, path)
		after, err := s.TryAcquire(bg(t), "job", "c", time.Minute, elector.Lease{})
		require.NoError(t, err)
		assert.Greater(t, after.Token, lost.Token, "the token of the forgotten term must not come again")
	})
}

// TestOpenLeaseTableDropped: a file whose meta table records the schema but
// whose lease table is gone is refused with an error that says so, and
// deleting the schema version lets Open start over, tokens above the old.
func TestOpenLeaseTableDropped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	s, err := sqlitelease.Open(path)
	require.NoError(t, err)
	before := acquireReleased(t, s, "job", "a")
	_, err = s.DB().ExecContext(bg(t), `DROP TABLE leaderaware_lease`)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	_, err = sqlitelease.Open(path)
	require.Error(t, err)
	t.Log(err)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "leaderaware_lease is gone")
	assert.Contains(t, err.Error(), "schema_version", "the error says how to start over")

	_, err = rawDB(t, path).ExecContext(bg(t), `DELETE FROM leaderaware_meta WHERE key = 'schema_version'`)
	require.NoError(t, err)
	c := stepclock.New()
	c.Step(-time.Hour) // only the high-water mark keeps the tokens up
	s = openPath(t, path, sqlitelease.WithClock(c))
	after, err := s.TryAcquire(bg(t), "job", "b", time.Minute, elector.Lease{})
	require.NoError(t, err)
	assert.Greater(t, after.Token, before.Token)
}
