// Package pgtest is how the tests of every package use the PostgreSQL test
// server: its DSN from LEADERAWARE_TEST_PG, a fresh schema dropped when the
// test ends, and one line saying so when the tests are skipped.
package pgtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Env names the environment variable with the test server's DSN.
const Env = "LEADERAWARE_TEST_PG"

const howTo = Env + "=postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// DSN returns the test server's DSN, or skips tb.
func DSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv(Env)
	if dsn == "" {
		tb.Skipf("set %s to run the PostgreSQL tests", howTo)
	}
	return dsn
}

// SaySkipped prints one line to stderr when the PostgreSQL tests of pkg
// will be skipped, saying how to run them. Call it from TestMain.
func SaySkipped(pkg string) {
	if os.Getenv(Env) == "" {
		fmt.Fprintf(os.Stderr, "%s: PostgreSQL tests skipped; set %s to run them\n", pkg, howTo)
	}
}

// Schema returns the name of a schema that does not exist yet, starting
// with prefix, and drops it with everything in it when tb ends.
func Schema(tb testing.TB, dsn, prefix string) string {
	tb.Helper()
	name := prefix + strings.ToLower(rand.Text()[:12])
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			tb.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// WithSearchPath returns dsn, a URL or keyword/value string, with its
// search_path set to schema.
func WithSearchPath(dsn, schema string) string { return WithParam(dsn, "search_path", schema) }

// WithParam returns dsn, a URL or keyword/value string, with the setting
// key=value.
func WithParam(dsn, key, value string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " " + key + "=" + value
}
