package jobdb_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/jobdb"
	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/leadertest"
)

// tables is a job's schema that differs between the dialects.
var tables = jobdb.Tables{
	jobdb.SQLite:     {`CREATE TABLE IF NOT EXISTS sqlschema_test (id INTEGER PRIMARY KEY, dialect TEXT NOT NULL) STRICT`},
	jobdb.PostgreSQL: {`CREATE TABLE IF NOT EXISTS sqlschema_test (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, dialect text NOT NULL)`},
}

// TestCreate: Detect tells the two stores apart, and replicas that create
// the same tables at once all succeed (on PostgreSQL, concurrent CREATE
// TABLE IF NOT EXISTS can otherwise fail on a duplicate key), into one
// table.
func TestCreate(t *testing.T) {
	leadertest.Run(t, func(t *testing.T, b leadertest.Backend) {
		want := jobdb.SQLite
		if t.Name() == "TestCreate/postgres" {
			want = jobdb.PostgreSQL
		}
		const replicas = 8
		dbs := make([]leadertest.Store, replicas)
		for i := range dbs {
			dbs[i] = b.Open(t)
		}
		d, err := jobdb.Detect(t.Context(), dbs[0].DB())
		require.NoError(t, err)
		assert.Equal(t, want, d)

		var wg sync.WaitGroup
		errs := make([]error, replicas)
		for i, st := range dbs {
			wg.Go(func() { errs[i] = jobdb.Create(t.Context(), st.DB(), "test", tables) })
		}
		wg.Wait()
		for i, err := range errs {
			assert.NoError(t, err, "replica %d", i)
		}
		for _, st := range dbs {
			_, err := st.DB().ExecContext(t.Context(), `INSERT INTO sqlschema_test (dialect) VALUES ($1)`, string(d))
			require.NoError(t, err)
		}
		var n int
		require.NoError(t, dbs[0].DB().QueryRowContext(t.Context(), `SELECT count(*) FROM sqlschema_test`).Scan(&n))
		assert.Equal(t, replicas, n, "every replica should write to the one table")
	})
}
