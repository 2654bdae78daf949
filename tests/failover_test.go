package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderaware/leaderaware/elector"
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
func pgDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("LEADERAWARE_TEST_PG")
	if dsn == "" {
		t.Skip("set LEADERAWARE_TEST_PG=postgres://postgres@127.0.0.1:5432/test?sslmode=disable to run")
	}
	return dsn
}

// pgSchema returns a schema name unique to this run, starting with prefix,
// and drops the schema (which pglease creates) when the test ends.
func pgSchema(t *testing.T, dsn, prefix string) string {
	t.Helper()
	schema := prefix + uniq()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}
