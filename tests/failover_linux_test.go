package tests

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/pgtest"
	"github.com/leaderaware/leaderaware/internal/testing/replicatest"
	"github.com/leaderaware/leaderaware/pglease"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// TestFailoverSQLite runs replicas as processes (helpers in mode replica,
// see TestMain) on one SQLite file and
// checks the failover bounds of the lease model (see replicatest.Failover).
// sqlitelease sees a holder's process die: a crashed leader is replaced at
// once.
func TestFailoverSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	s, err := sqlitelease.Open(path) // one store for the reads: Open itself may wait for a frozen writer
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	replicatest.Failover(t, []string{"-db", path}, writeLocked{s}, replicatest.DeathDetected())
}

// writeLocked is a SQLite store whose Get first takes the file's write
// lock: readers never wait in WAL mode, so a frozen process that holds it
// (and would keep candidates from taking over) shows as an error.
type writeLocked struct{ *sqlitelease.Store }

func (s writeLocked) Get(ctx context.Context, name string) (elector.Lease, error) {
	tx, err := s.DB().BeginTx(ctx, nil) // BEGIN IMMEDIATE
	if err != nil {
		return elector.Lease{}, fmt.Errorf("take the write lock: %w", err)
	}
	if err := tx.Rollback(); err != nil {
		return elector.Lease{}, err
	}
	return s.Store.Get(ctx, name)
}

// TestFailoverPostgres is TestFailoverSQLite on PostgreSQL, with a lease
// table in a schema of its own, dropped at the end.
func TestFailoverPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn, "leaderaware_failover_")
	s, err := pglease.Open(t.Context(), dsn, pglease.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	replicatest.Failover(t, []string{"-pg", dsn, "-schema", schema}, s)
}
