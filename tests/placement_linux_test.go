package tests

import (
	"path/filepath"
	"testing"

	"github.com/leaderaware/leaderaware/internal/testing/pgtest"
	"github.com/leaderaware/leaderaware/internal/testing/replicatest"
)

// TestPlacementSQLite runs the placement scenarios (see
// replicatest.Placement) with replica processes on one SQLite file: 12
// leases on 3 replicas, balanced by a placement.Group and first come,
// first wins (with -placement.firstwins), side by side. With -v it logs
// the figures' table.
func TestPlacementSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("about 60 s of processes (twice that with -placement.firstwins); skipped with -short")
	}
	replicatest.Placement(t, []string{"-db", filepath.Join(t.TempDir(), "leases.db")})
}

// TestPlacementPostgres is TestPlacementSQLite on PostgreSQL, with a lease
// table in a schema of its own, dropped at the end.
func TestPlacementPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("about 60 s of processes (twice that with -placement.firstwins); skipped with -short")
	}
	dsn := pgtest.DSN(t)
	replicatest.Placement(t, []string{"-pg", dsn, "-schema", pgtest.Schema(t, dsn, "leaderaware_placement_")})
}
