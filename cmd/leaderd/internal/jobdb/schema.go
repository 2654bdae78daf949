package jobdb

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"strings"
)

// Dialect is the SQL dialect of a database.
type Dialect string

// The dialects the reference jobs speak.
const (
	SQLite     Dialect = "SQLite"
	PostgreSQL Dialect = "PostgreSQL"
)

// Tables are the statements that create a job's tables, per dialect.
type Tables map[Dialect][]string

// lockKey is the transaction-level advisory lock that serializes the table
// creation of every job on a PostgreSQL database: two replicas that run
// CREATE TABLE IF NOT EXISTS at once can otherwise fail on a duplicate key.
var lockKey = func() int64 {
	h := fnv.New64a()
	h.Write([]byte("github.com/leaderaware/leaderaware/jobs: schema"))
	return int64(h.Sum64())
}()

// Create asks db which dialect it speaks and runs that dialect's statements
// of t in one transaction. Errors start with pkg, the job's package name.
func Create(ctx context.Context, db *sql.DB, pkg string, t Tables) error {
	d, err := Detect(ctx, db)
	if err != nil {
		return fmt.Errorf("%s: %w", pkg, err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: create tables: %w", pkg, err)
	}
	defer tx.Rollback() // a no-op after Commit
	if d == PostgreSQL {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey); err != nil {
			return fmt.Errorf("%s: lock table creation: %w", pkg, err)
		}
	}
	for _, stmt := range t[d] {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%s: create tables (%s): %w", pkg, d, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: create tables: %w", pkg, err)
	}
	return nil
}

// Detect returns the dialect of db: PostgreSQL if version() names it,
// SQLite if sqlite_version() answers. It asks PostgreSQL's question first,
// so that a PostgreSQL server logs no failed statement.
func Detect(ctx context.Context, db *sql.DB) (Dialect, error) {
	var v string
	pgErr := db.QueryRowContext(ctx, `SELECT version()`).Scan(&v)
	switch {
	case pgErr == nil && strings.HasPrefix(v, "PostgreSQL"):
		return PostgreSQL, nil
	case pgErr == nil:
		return "", fmt.Errorf("the database is %q; the reference jobs speak SQLite and PostgreSQL", v)
	}
	if err := db.QueryRowContext(ctx, `SELECT sqlite_version()`).Scan(&v); err != nil {
		return "", fmt.Errorf("tell SQLite from PostgreSQL: version(): %v; sqlite_version(): %w", pgErr, err)
	}
	return SQLite, nil
}
