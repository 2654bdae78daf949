package mysqllease

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// leaseOps runs a round of lease operations, each within d.
func leaseOps(t *testing.T, s *Store, name string, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(testCtx(t), d)
	defer cancel()
	l, err := s.TryAcquire(ctx, name, "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	l, err = s.Renew(ctx, l, time.Minute)
	require.NoError(t, err)
	_, err = s.Get(ctx, name)
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, l))
}

// holdAll takes every connection db may open and keeps them, each in an
// open transaction, until t ends: jobs that starve the pool.
func holdAll(t *testing.T, db *sql.DB, n int) {
	for range n {
		c, err := db.Conn(testCtx(t))
		require.NoError(t, err)
		tx, err := c.BeginTx(testCtx(t), nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback(); _ = c.Close() })
	}
	ctx, cancel := context.WithTimeout(testCtx(t), 50*time.Millisecond)
	defer cancel()
	_, err := db.Conn(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the job pool must be exhausted")
}

// TestLeasesNotStarvedByJobs (Open): jobs holding every connection of
// Store.DB do not hold up lease operations.
func TestLeasesNotStarvedByJobs(t *testing.T) {
	s := openStore(t, "")
	s.DB().SetMaxOpenConns(2)
	holdAll(t, s.DB(), 2)
	leaseOps(t, s, "job", 2*time.Second)
}

// TestNewReservesLeaseConns: New's lease connections stay reserved while
// jobs take the rest of the caller's pool, and go back to it at Close.
func TestNewReservesLeaseConns(t *testing.T) {
	table := freshTable(t)
	db := rawDB(t)
	db.SetMaxOpenConns(3)
	s, err := New(db, WithTable(table), WithLeaseConns(1))
	require.NoError(t, err)
	assert.Equal(t, 1, db.Stats().InUse, "New reserves its first lease connection at once")
	holdAll(t, db, 2)
	leaseOps(t, s, "job", 2*time.Second)
	require.NoError(t, s.Close())
	assert.Equal(t, 2, db.Stats().InUse, "Close gives the reserved connection back")
}

// connectionID is the server's id of the connection that a lease
// operation of s runs on now.
func connectionID(t *testing.T, s *Store) int64 {
	var id int64
	require.NoError(t, s.leases.do(testCtx(t), func(q querier) error {
		return q.QueryRowContext(testCtx(t), "SELECT CONNECTION_ID()").Scan(&id)
	}))
	return id
}

// TestKilledLeaseConnReplaced: a lease connection the server closed (KILL,
// wait_timeout, a restart) is noticed before use and replaced, without
// failing an operation.
func TestKilledLeaseConnReplaced(t *testing.T) {
	for _, c := range []struct {
		name string
		open func(t *testing.T) *Store
	}{
		{"Open", func(t *testing.T) *Store { return openStore(t, "", WithLeaseConns(1)) }},
		{"New", func(t *testing.T) *Store {
			s, err := New(rawDB(t), WithTable(freshTable(t)), WithLeaseConns(1))
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.open(t)
			before := connectionID(t, s)
			_, err := rawDB(t).ExecContext(testCtx(t), "KILL ?", before)
			require.NoError(t, err)
			time.Sleep(100 * time.Millisecond) // the server closes the socket
			leaseOps(t, s, "job", 5*time.Second)
			assert.NotEqual(t, before, connectionID(t, s), "a new connection")
		})
	}
}
