package tests

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/pgtest"
	"github.com/leaderaware/leaderaware/pglease"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// TestFailoverSQLite runs processes on one SQLite file and checks the
// failover bounds of runFailover. On Linux, sqlitelease detects the death of
// a holder's process: a crashed leader is replaced at once.
func TestFailoverSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	s, err := sqlitelease.Open(path) // one store for the reads: Open itself may wait for a frozen writer
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	read := func(ctx context.Context) (elector.Lease, error) {
		// Readers never wait in WAL mode: take the write lock too, so that
		// a frozen process that holds it (and would keep candidates from
		// taking over) shows as an error.
		tx, err := s.DB().BeginTx(ctx, nil) // BEGIN IMMEDIATE
		if err != nil {
			return elector.Lease{}, fmt.Errorf("take the write lock: %w", err)
		}
		if err := tx.Rollback(); err != nil {
			return elector.Lease{}, err
		}
		return s.Get(ctx, "job")
	}
	runFailover(t, read, runtime.GOOS == "linux", "-db", path)
}

// TestFailoverPostgres is TestFailoverSQLite on PostgreSQL, with a lease
// table in a schema of its own, dropped at the end.
func TestFailoverPostgres(t *testing.T) {
	dsn := pgDSN(t)
	schema := pgSchema(t, dsn, "leaderaware_failover_")
	name := "failover"
	read := func(ctx context.Context) (elector.Lease, error) {
		s, err := pglease.Open(ctx, dsn, pglease.WithSchema(schema))
		if err != nil {
			return elector.Lease{}, err
		}
		defer s.Close()
		return s.Get(ctx, name)
	}
	runFailover(t, read, false, "-pg", dsn, "-schema", schema, "-name", name)
}

// pgDSN returns LEADERAWARE_TEST_PG, or skips the test if it is unset.
func pgDSN(t *testing.T) string { return pgtest.DSN(t) }

// pgSchema returns a schema name unique to this run, starting with prefix,
// and drops the schema (which pglease creates) when the test ends.
func pgSchema(t *testing.T, dsn, prefix string) string { return pgtest.Schema(t, dsn, prefix) }
