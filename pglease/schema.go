package pglease

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leaderaware/leaderaware/internal/pgsql"
)

// SchemaVersion is the lease table layout this pglease creates; [Open]
// migrates older tables to it and refuses newer ones ([ErrSchemaTooNew]).
const SchemaVersion = 3

// migrations[v-1] takes the tables from version v-1 to version v. Each runs
// in the schema transaction, after the advisory lock; %[1]s is the lease
// table, quoted and schema-qualified, and %[2]s its token mark table
// ([pgsql.TokenTable]). Append, never edit. A migration that leaves the
// lease columns as they were must be idempotent: when the version record
// was lost, layoutVersion cannot tell whether it ran, and it runs again.
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
	// 2: elapsed time: no expiry, but each holder's TTL and a version.
	// Existing rows stay held, with the TTL they were last given.
	`ALTER TABLE %[1]s
		ADD COLUMN version    bigint      NOT NULL DEFAULT 1 CHECK (version > 0),
		ADD COLUMN ttl_us     bigint,
		ADD COLUMN released   boolean     NOT NULL DEFAULT false,
		ADD COLUMN written_at timestamptz;
	UPDATE %[1]s SET written_at = renewed_at,
		ttl_us = GREATEST(ceil(extract(epoch FROM expires_at - renewed_at) * 1000000), 1);
	ALTER TABLE %[1]s
		ALTER COLUMN version DROP DEFAULT,
		ALTER COLUMN released DROP DEFAULT,
		ALTER COLUMN ttl_us SET NOT NULL,
		ALTER COLUMN written_at SET NOT NULL,
		ADD CHECK (ttl_us > 0),
		DROP COLUMN expires_at,
		DROP COLUMN acquired_at,
		DROP COLUMN renewed_at`,
	// 3: the token mark, outside the lease rows so that it survives their
	// loss; it starts at the largest token.
	`CREATE TABLE IF NOT EXISTS %[2]s (
		singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
		token     bigint  NOT NULL CHECK (token >= 0)
	);
	INSERT INTO %[2]s AS m (token) SELECT COALESCE(max(token), 0) FROM %[1]s
	ON CONFLICT (singleton) DO UPDATE SET token = GREATEST(m.token, excluded.token)`,
}

// schemaLockKey is the advisory lock of every pglease schema creation.
var schemaLockKey = func() int64 {
	h := fnv.New64a()
	h.Write([]byte("github.com/leaderaware/leaderaware/pglease: schema"))
	return int64(h.Sum64())
}()

// ensureSchema creates or migrates the tables. When they are current it
// only reads the version record; otherwise it runs the DDL in one
// transaction behind an advisory lock, and decides again under the lock.
func (s *Store) ensureSchema(ctx context.Context) error {
	st, err := s.tableState(ctx, s.leases)
	if err != nil && !isMissingTable(err) {
		return fmt.Errorf("read schema version of %s: %w", s.versionTable, err)
	}
	if err == nil {
		if v, err := s.layoutVersion(st); err != nil || v == SchemaVersion && st.version == SchemaVersion {
			return err
		}
	}
	tx, err := s.leases.Begin(ctx)
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
	if st, err = s.tableState(ctx, tx); err != nil {
		return fmt.Errorf("read schema version of %s: %w", s.versionTable, err)
	}
	v, err := s.layoutVersion(st)
	if err != nil {
		return err
	}
	for next := v + 1; next <= SchemaVersion; next++ {
		if _, err := tx.Exec(ctx, fmt.Sprintf(migrations[next-1], s.table, pgsql.TokenTable(s.table))); err != nil {
			return fmt.Errorf("migrate %s to schema version %d: %w", s.table, next, err)
		}
	}
	if st.version < SchemaVersion {
		if _, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (version) VALUES ($1)
			ON CONFLICT (singleton) DO UPDATE SET version = excluded.version`, s.versionTable), SchemaVersion); err != nil {
			return fmt.Errorf("record schema version %d in %s: %w", SchemaVersion, s.versionTable, err)
		}
	}
	return tx.Commit(ctx)
}

// tables is what Open reads of the lease table and its version record.
type tables struct {
	version int      // recorded in the version table; 0 if it has no record
	leases  bool     // the lease table exists
	columns []string // of the lease table
}

// tableState reads tables in one statement.
func (s *Store) tableState(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (tables, error) {
	var st tables
	var v *int
	err := q.QueryRow(ctx, `SELECT (SELECT version FROM `+s.versionTable+`), to_regclass($1) IS NOT NULL,
		ARRAY(SELECT attname::text FROM pg_attribute WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped)`,
		s.table).Scan(&v, &st.leases, &st.columns)
	if v != nil {
		st.version = *v
	}
	return st, err
}

// layouts[v] are the lease table's columns at version v. Append.
var layouts = [][]string{
	1: {"name", "holder", "token", "expires_at", "acquired_at", "renewed_at"},
	2: {"name", "holder", "token", "version", "ttl_us", "released", "written_at"},
	3: {"name", "holder", "token", "version", "ttl_us", "released", "written_at"},
}

// layoutVersion returns the schema version of the lease table (0 when
// there is none): the recorded one or, when the record was lost, the oldest
// version with the newest layout it has. It refuses a version newer than this pglease's, a lease
// table dropped while its record stayed, and a table without the lease
// columns (an application's, or a version table, named by WithTable).
func (s *Store) layoutVersion(st tables) (int, error) {
	switch {
	case st.version > SchemaVersion:
		return 0, fmt.Errorf("%w: %s records version %d, this pglease knows up to %d; upgrade leaderaware",
			ErrSchemaTooNew, s.versionTable, st.version, SchemaVersion)
	case !st.leases && st.version > 0:
		return 0, fmt.Errorf("lease table %s is missing, yet %s records schema version %d: the table was dropped; "+
			"restore it, or drop %s too so that Open creates both afresh", s.table, s.versionTable, st.version, s.versionTable)
	case !st.leases:
		return 0, nil
	}
	has := make(map[string]bool, len(st.columns))
	for _, c := range st.columns {
		has[c] = true
	}
	missing := func(v int) string {
		for _, c := range layouts[v] {
			if !has[c] {
				return c
			}
		}
		return ""
	}
	v := st.version
	if v == 0 { // the version record was lost: the newest layout it has
		v = SchemaVersion
		for v > 1 && missing(v) != "" {
			v--
		}
		for v > 1 && slices.Equal(layouts[v-1], layouts[v]) {
			v--
		}
	}
	if c := missing(v); c != "" {
		return 0, fmt.Errorf("table %s exists but is not a pglease lease table (it has no column %q); "+
			"name another with WithTable, or drop it if it is left over", s.table, c)
	}
	return v, nil
}

func isMissingTable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000") // undefined table, schema
}
