package leadertest_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/leadertest"
	"github.com/leaderaware/leaderaware/elector"
)

// TestFencedStore checks the contract of jobdb.FencedStore that the
// reference jobs rely on, on both stores (*sqlitelease.Store and
// *jobdb.Postgres): a current term commits; a deposed one, a term whose trust
// window has closed and a ctx without a term write nothing; fn's own error
// rolls back and comes back as it is.
func TestFencedStore(t *testing.T) {
	leadertest.Run(t, func(t *testing.T, b leadertest.Backend) {
		st := b.Open(t)
		_, err := st.DB().ExecContext(t.Context(), `CREATE TABLE fenced_test (n INTEGER NOT NULL)`)
		require.NoError(t, err)
		count := func() int {
			var n int
			require.NoError(t, st.DB().QueryRowContext(t.Context(), `SELECT count(*) FROM fenced_test`).Scan(&n))
			return n
		}
		insert := func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO fenced_test (n) VALUES ($1)`, 1)
			return err
		}

		ctx, l := leadertest.Lead(t, st, "fenced", "me")
		require.NoError(t, st.Fenced(ctx, insert))
		assert.Equal(t, 1, count())

		errFn := errors.New("fn failed")
		err = st.Fenced(ctx, func(ctx context.Context, tx *sql.Tx) error {
			require.NoError(t, insert(ctx, tx))
			return errFn
		})
		assert.Same(t, errFn, err, "fn's error should come back as it is")
		assert.Equal(t, 1, count(), "fn's error should roll back")

		assert.ErrorIs(t, st.Fenced(t.Context(), insert), elector.ErrNoTerm)

		leadertest.Depose(t, st, l)
		leadertest.RequireRefused(t, st.Fenced(ctx, insert))
		assert.Equal(t, 1, count(), "a deposed term wrote")

		// A term past its trust window, which no renewal extended.
		short, err := st.TryAcquire(t.Context(), "short", "me", 200*time.Millisecond, elector.Lease{})
		require.NoError(t, err)
		term := leadertest.NewTerm(short)
		time.Sleep(250 * time.Millisecond)
		term.Abandon() // as the elector does once the trust window closes
		err = st.Fenced(elector.ContextWithTerm(t.Context(), term), insert)
		assert.True(t, errors.Is(err, elector.ErrLeaseLost) || errors.Is(err, elector.ErrLeaseExpired),
			"a term past its trust window should be refused: %v", err)
		assert.Equal(t, 1, count(), "a term past its trust window wrote")
	})
}
