package mysqllease

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// envDSN names the environment variable with the test server's DSN.
const envDSN = "LEADERAWARE_TEST_MYSQL"

var (
	reachOnce sync.Once
	reachErr  error
)

// testDSN returns the test server's DSN. Without one it skips t, unless CI
// is set: then, as when the server is unreachable, it fails t.
func testDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(envDSN)
	if dsn == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but %s is not: CI must run the MySQL tests (e.g. %s='root@tcp(127.0.0.1:3306)/test')", envDSN, envDSN)
		}
		t.Skipf("set %s='root@tcp(127.0.0.1:3306)/test' to run the MySQL tests", envDSN)
	}
	reachOnce.Do(func() {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			reachErr = err
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		reachErr = db.PingContext(ctx)
	})
	if reachErr != nil {
		t.Fatalf("%s is set but the server is unreachable: %v", envDSN, reachErr)
	}
	return dsn
}

// testCtx is t's context with a bound, so that a hung server fails the test
// instead of hanging it.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// rawDB is a pool of the test's own, outside any store, closed at cleanup.
func rawDB(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", testDSN(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// freshTable returns a table name that no test used yet; the lease table
// and its version table are dropped when t ends.
func freshTable(t testing.TB) string {
	t.Helper()
	name := "la_test_" + randomHex(6)
	dsn := testDSN(t)
	t.Cleanup(func() { dropTables(t, dsn, name) })
	return name
}

func dropTables(t testing.TB, dsn, table string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Errorf("drop %s: %v", table, err)
		return
	}
	defer db.Close()
	for _, name := range []string{table, table + versionSuffix, table + "_jobs"} {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+quote(name)); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	}
}

// openStore opens a store on table (a fresh one if "") and closes it when
// t ends.
func openStore(t testing.TB, table string, opts ...Option) *Store {
	t.Helper()
	if table == "" {
		table = freshTable(t)
	}
	s, err := Open(testCtx(t), testDSN(t), append([]Option{WithTable(table)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// read reads the row of name, released or not, as TryAcquire does.
func (s *Store) read(ctx context.Context, q querier, name string) (elector.Lease, bool, error) {
	return scanLease(q.QueryRowContext(ctx, s.sqlRead, name))
}
