package sqlitelease_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// jobTable creates the job's table and returns a function that counts its rows.
func jobTable(t *testing.T, s *sqlitelease.Store) func() int {
	t.Helper()
	_, err := s.DB().ExecContext(bg(t), `CREATE TABLE IF NOT EXISTS prices (sym TEXT PRIMARY KEY, cents INTEGER)`)
	require.NoError(t, err)
	return func() int {
		t.Helper()
		var n int
		require.NoError(t, s.DB().QueryRowContext(bg(t), `SELECT count(*) FROM prices`).Scan(&n))
		return n
	}
}

func insertPrice(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO prices (sym, cents) VALUES ('ACME', 4200)`)
	return err
}

// waitFree polls Get until name has no live holder.
func waitFree(t *testing.T, s *sqlitelease.Store, name string) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := s.Get(bg(t), name)
		return errors.Is(err, elector.ErrNoLease)
	}, 5*time.Second, 5*time.Millisecond)
}

func TestFencedCommitsWhenCurrent(t *testing.T) {
	s := open(t)
	rows := jobTable(t, s)
	l, err := s.TryAcquire(bg(t), "prices", "a", time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.FencedLease(bg(t), l, insertPrice))
	assert.Equal(t, 1, rows())
	// A renewed lease is the same term.
	r, err := s.Renew(bg(t), l, time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.FencedLease(bg(t), r, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE prices SET cents = 4300`)
		return err
	}))
}

func TestFencedRefusedAfterTakeover(t *testing.T) {
	s := open(t)
	rows := jobTable(t, s)
	old, err := s.TryAcquire(bg(t), "prices", "a", 100*time.Millisecond)
	require.NoError(t, err)
	waitFree(t, s, "prices")
	_, err = s.TryAcquire(bg(t), "prices", "b", time.Minute)
	require.NoError(t, err)

	called := false
	err = s.FencedLease(bg(t), old, func(ctx context.Context, tx *sql.Tx) error {
		called = true
		return insertPrice(ctx, tx)
	})
	require.ErrorIs(t, err, elector.ErrLeaseLost)
	assert.False(t, called, "a stale term must not even run the job's statements")
	assert.Equal(t, 0, rows(), "nothing may be written")
}

func TestFencedRefusedAfterRelease(t *testing.T) {
	s := open(t)
	rows := jobTable(t, s)
	l, err := s.TryAcquire(bg(t), "prices", "a", time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Release(bg(t), l))
	require.ErrorIs(t, s.FencedLease(bg(t), l, insertPrice), elector.ErrLeaseLost)
	assert.Equal(t, 0, rows())
}

func TestFencedRefusedAfterExpiry(t *testing.T) {
	s := open(t)
	rows := jobTable(t, s)

	t.Run("before the transaction", func(t *testing.T) {
		l, err := s.TryAcquire(bg(t), "early", "a", 50*time.Millisecond)
		require.NoError(t, err)
		waitFree(t, s, "early")
		require.ErrorIs(t, s.FencedLease(bg(t), l, insertPrice), elector.ErrLeaseLost)
		assert.Equal(t, 0, rows())
	})
	t.Run("during the transaction", func(t *testing.T) {
		l, err := s.TryAcquire(bg(t), "late", "a", 100*time.Millisecond)
		require.NoError(t, err)
		err = s.FencedLease(bg(t), l, func(ctx context.Context, tx *sql.Tx) error {
			if err := insertPrice(ctx, tx); err != nil {
				return err
			}
			time.Sleep(time.Until(l.ExpiresAt) + 20*time.Millisecond) // the job ran too long
			return nil
		})
		require.ErrorIs(t, err, elector.ErrLeaseLost)
		assert.Equal(t, 0, rows(), "the check before commit must roll the write back")
	})
}

func TestFencedJobErrorRollsBack(t *testing.T) {
	s := open(t)
	rows := jobTable(t, s)
	l, err := s.TryAcquire(bg(t), "prices", "a", time.Minute)
	require.NoError(t, err)
	boom := errors.New("boom")
	err = s.FencedLease(bg(t), l, func(ctx context.Context, tx *sql.Tx) error {
		if err := insertPrice(ctx, tx); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	assert.Equal(t, 0, rows())
}

func TestFencedWithoutTerm(t *testing.T) {
	s := open(t)
	rows := jobTable(t, s)
	err := s.Fenced(bg(t), insertPrice)
	require.ErrorIs(t, err, elector.ErrNoTerm)
	assert.Equal(t, 0, rows())
}

// TestFencedTermFromContext runs fenced writes with the term an elector
// gives, as a decorated job would.
func TestFencedTermFromContext(t *testing.T) {
	s := open(t)
	rows := jobTable(t, s)
	e, err := elector.New(s, "prices", elector.Config{TTL: 10 * time.Second, Holder: "a"})
	require.NoError(t, err)
	term, err := e.Campaign(bg(t))
	require.NoError(t, err)
	ctx := elector.ContextWithTerm(bg(t), term)

	require.NoError(t, s.Fenced(ctx, insertPrice))
	assert.Equal(t, 1, rows())

	require.NoError(t, term.Resign(bg(t)))
	err = s.Fenced(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM prices`)
		return err
	})
	require.ErrorIs(t, err, elector.ErrLeaseLost)
	assert.ErrorIs(t, err, elector.ErrResigned, "the error says how the term ended")
	assert.Equal(t, 1, rows())

	// The lease itself, given explicitly, is refused by the store's check.
	l, ok := elector.LeaseFromContext(ctx)
	require.True(t, ok)
	require.ErrorIs(t, s.FencedLease(bg(t), l, insertPrice), elector.ErrLeaseLost)
}
