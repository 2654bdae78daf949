package jobdb_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/leadertest"
)

// TestPostgresBoundsTheTransaction: on PostgreSQL the server itself bounds
// a fenced transaction's statements and idle waits by the trust the term
// has left (here at most its one-minute TTL), so that a job frozen inside
// it cannot hold its lease row past a takeover.
func TestPostgresBoundsTheTransaction(t *testing.T) {
	leadertest.Run(t, func(t *testing.T, b leadertest.Backend) {
		if t.Name() != "TestPostgresBoundsTheTransaction/postgres" {
			t.Skip("SQLite has no server-side timeouts")
		}
		st := b.Open(t)
		ctx, _ := leadertest.Lead(t, st, "bound", "me")
		ms := map[string]int64{}
		require.NoError(t, st.Fenced(ctx, func(ctx context.Context, tx *sql.Tx) error {
			rows, err := tx.QueryContext(ctx, `SELECT name, setting::bigint FROM pg_settings
				WHERE name IN ('statement_timeout', 'idle_in_transaction_session_timeout')`)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var name string
				var v int64
				if err := rows.Scan(&name, &v); err != nil {
					return err
				}
				ms[name] = v
			}
			return rows.Err()
		}))
		require.Len(t, ms, 2)
		for name, v := range ms {
			d := time.Duration(v) * time.Millisecond
			assert.True(t, d > 50*time.Second && d <= time.Minute, "%s = %v, want the trust left of a one-minute term", name, d)
		}
	})
}
