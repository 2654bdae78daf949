package tests

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFailoverSQLite runs three processes on one SQLite file: exactly one
// runs the job; a crashed leader is replaced within TTL + RetryInterval and
// not before its lease could expire; a stopped leader hands off within 1 s.
func TestFailoverSQLite(t *testing.T) {
	runFailover(t, "-db", filepath.Join(t.TempDir(), "leases.db"))
}

// TestFailoverPostgres is TestFailoverSQLite on PostgreSQL.
func TestFailoverPostgres(t *testing.T) {
	dsn := os.Getenv("LEADERAWARE_TEST_PG")
	if dsn == "" {
		t.Skip("set LEADERAWARE_TEST_PG=postgres://postgres@127.0.0.1:5432/test?sslmode=disable to run")
	}
	runFailover(t, "-pg", dsn, "-name", "failover-"+t.Name()+"-"+uniq())
}
