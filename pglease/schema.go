package pglease

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SchemaVersion is the version of the lease table layout that this pglease
// creates and understands. [Open] migrates older tables up to it and refuses
// newer ones with [ErrSchemaTooNew].
const SchemaVersion = 1

// migrations[v-1] takes the tables from version v-1 to version v. Each runs
// in the schema transaction, after the advisory lock; %[1]s is the lease
// table, quoted and schema-qualified. Append, never edit.
var migrations = []string{
	// 1: the lease table. Rows are never deleted, so tokens never go back.
	`CREATE TABLE IF NOT EXISTS %[1]s (
		name        text        PRIMARY KEY,
		holder      text        NOT NULL,
		token       bigint      NOT NULL CHECK (token > 0),
		expires_at  timestamptz NOT NULL,
		acquired_at timestamptz NOT NULL,
		renewed_at  timestamptz NOT NULL
	)`,
}

// schemaLockKey is the transaction-level advisory lock that serializes the
// schema creation of every pglease store in a database, whatever its table.
var schemaLockKey = func() int64 {
	h := fnv.New64a()
	h.Write([]byte("github.com/leaderaware/leaderaware/pglease: schema"))
	return int64(h.Sum64())
}()

// PostgreSQL error codes that mean the version table is not there yet.
const (
	codeUndefinedTable = "42P01"
	codeInvalidSchema  = "3F000"
)

// ensureSchema creates or migrates the tables. The fast path is one SELECT of
// the version record and needs no privilege beyond reading it; only a missing
// or older schema takes the advisory lock and runs DDL, all in one
// transaction, so that replicas starting together on a fresh database neither
// fail nor see a half-made table.
func (s *Store) ensureSchema(ctx context.Context) error {
	v, err := s.schemaVersion(ctx, s.pool)
	switch {
	case err == nil && v == SchemaVersion:
		return nil
	case err == nil && v > SchemaVersion:
		return s.tooNew(v)
	case err != nil && !isMissingTable(err) && !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("read schema version of %s: %w", s.versionTable, err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, schemaLockKey); err != nil {
		return fmt.Errorf("lock schema creation: %w", err)
	}
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, s.schema).Scan(&exists); err != nil {
		return fmt.Errorf("look up schema %q: %w", s.schema, err)
	}
	if !exists { // CREATE SCHEMA IF NOT EXISTS would still need the CREATE privilege
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{s.schema}.Sanitize()); err != nil {
			return fmt.Errorf("create schema %q: %w", s.schema, err)
		}
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
		singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
		version   integer NOT NULL
	)`, s.versionTable)); err != nil {
		return fmt.Errorf("create %s: %w", s.versionTable, err)
	}
	v, err = s.schemaVersion(ctx, tx)
	if errors.Is(err, pgx.ErrNoRows) {
		v, err = 0, nil
	}
	if err != nil {
		return fmt.Errorf("read schema version of %s: %w", s.versionTable, err)
	}
	if v > SchemaVersion {
		return s.tooNew(v)
	}
	for next := v + 1; next <= SchemaVersion; next++ {
		if _, err := tx.Exec(ctx, fmt.Sprintf(migrations[next-1], s.table)); err != nil {
			return fmt.Errorf("migrate %s to schema version %d: %w", s.table, next, err)
		}
	}
	if v < SchemaVersion {
		if _, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (version) VALUES ($1)
			ON CONFLICT (singleton) DO UPDATE SET version = excluded.version`, s.versionTable), SchemaVersion); err != nil {
			return fmt.Errorf("record schema version %d in %s: %w", SchemaVersion, s.versionTable, err)
		}
	}
	return tx.Commit(ctx)
}

type queryRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (s *Store) schemaVersion(ctx context.Context, q queryRower) (int, error) {
	var v int
	err := q.QueryRow(ctx, `SELECT version FROM `+s.versionTable).Scan(&v)
	return v, err
}

func (s *Store) tooNew(v int) error {
	return fmt.Errorf("%w: %s records version %d, this pglease knows up to %d; upgrade leaderaware",
		ErrSchemaTooNew, s.versionTable, v, SchemaVersion)
}

func isMissingTable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == codeUndefinedTable || pgErr.Code == codeInvalidSchema)
}
