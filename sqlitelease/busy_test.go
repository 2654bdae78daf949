package sqlitelease_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// holdWriteLock starts a write transaction on db, another connection to the
// file, and commits it after d. It returns when the lock is held; the
// returned channel receives the commit's result.
func holdWriteLock(t *testing.T, db *sql.DB, d time.Duration) <-chan error {
	t.Helper()
	tx, err := db.BeginTx(bg(t), nil) // BEGIN IMMEDIATE: takes the write lock now
	require.NoError(t, err)
	_, err = tx.ExecContext(bg(t), `CREATE TABLE IF NOT EXISTS other_job (x INTEGER)`)
	require.NoError(t, err)
	done := make(chan error, 1)
	time.AfterFunc(d, func() { done <- tx.Commit() })
	return done
}

// TestBusyIsRetried checks that lease operations wait out another
// connection's write transaction instead of returning SQLITE_BUSY, both when
// SQLite's busy timeout waits and when it gives up at once and the store's
// own retry does.
func TestBusyIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []sqlitelease.Option
	}{
		{"busy timeout", nil},
		{"store retry", []sqlitelease.Option{sqlitelease.WithBusyTimeout(0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "leases.db")
			s := openPath(t, path, tc.opts...)
			other := rawDB(t, path)
			impatient, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(0)")
			require.NoError(t, err)
			t.Cleanup(func() { _ = impatient.Close() })

			committed := holdWriteLock(t, other, 100*time.Millisecond)
			if tc.opts != nil {
				// Without the store's retry, the same statement fails.
				_, err := impatient.ExecContext(bg(t), `INSERT INTO leaderaware_lease (name, holder, token, version, ttl_ms, released, written_at) VALUES ('x', 'x', 1, 1, 1, 0, 0)`)
				var se *sqlite.Error
				require.ErrorAs(t, err, &se)
				require.Equal(t, sqlite3.SQLITE_BUSY, se.Code()&0xff)
			}
			start := time.Now()
			l, err := s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
			require.NoError(t, err, "TryAcquire must wait for the lock, not fail")
			assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond, "the lock was held")
			require.NoError(t, <-committed)

			committed = holdWriteLock(t, other, 100*time.Millisecond)
			l, err = s.Renew(bg(t), l, time.Minute)
			require.NoError(t, err)
			require.NoError(t, <-committed)

			rows := jobTable(t, s)
			committed = holdWriteLock(t, other, 100*time.Millisecond)
			require.NoError(t, s.FencedLease(bg(t), l, insertPrice))
			require.NoError(t, <-committed)
			assert.Equal(t, 1, rows())

			committed = holdWriteLock(t, other, 100*time.Millisecond)
			require.NoError(t, s.Release(bg(t), l))
			require.NoError(t, <-committed)
		})
	}
}

// TestBusyGivesUpWithContext checks that a lease operation blocked by a
// long write transaction returns the context's error when it ends.
func TestBusyGivesUpWithContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	s := openPath(t, path, sqlitelease.WithBusyTimeout(0))
	committed := holdWriteLock(t, rawDB(t, path), 500*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := s.TryAcquire(ctx, "job", "a", time.Minute, elector.Lease{})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "busy")
	require.NoError(t, <-committed)
}
