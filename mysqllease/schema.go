package mysqllease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// SchemaVersion is the version of the lease table layout that this
// mysqllease creates and understands. [Open] and [New] refuse a table of a
// newer version with [ErrSchemaTooNew].
const SchemaVersion = 1

// leaseTableDDL creates the lease table; %s is its quoted name. Names and
// holders are byte strings compared byte for byte (no collation, no pad
// space), up to elector.MaxNameLen bytes. written_at is the writer's wall
// clock in UTC, for display only.
const leaseTableDDL = `CREATE TABLE IF NOT EXISTS %s (
	name       VARBINARY(255)  NOT NULL,
	holder     VARBINARY(255)  NOT NULL,
	token      BIGINT UNSIGNED NOT NULL,
	version    BIGINT UNSIGNED NOT NULL,
	ttl_us     BIGINT UNSIGNED NOT NULL,
	released   BOOLEAN         NOT NULL,
	written_at DATETIME(6)     NOT NULL,
	PRIMARY KEY (name)
) ENGINE=InnoDB`

// versionTableDDL creates the schema version table, one row.
const versionTableDDL = `CREATE TABLE IF NOT EXISTS %s (
	id      TINYINT UNSIGNED NOT NULL PRIMARY KEY,
	version INT UNSIGNED     NOT NULL
) ENGINE=InnoDB`

// ensureSchema checks the server and creates the tables if need be. When
// the version row is there and current, it only reads, so the runtime user
// needs no DDL privilege. Creation is safe for concurrent Opens without a
// lock: every step is idempotent (CREATE TABLE IF NOT EXISTS, INSERT
// IGNORE), and the lease table is created before the version table, so a
// version row without a lease table always means someone dropped it.
func (s *Store) ensureSchema(ctx context.Context, q querier) error {
	var version string
	var db sql.NullString
	if err := q.QueryRowContext(ctx, `SELECT VERSION(), DATABASE()`).Scan(&version, &db); err != nil {
		return err
	}
	if !db.Valid {
		return errors.New("the connection has no default database; name one in the DSN (user:password@tcp(host:3306)/dbname)")
	}
	s.database, s.mariaDB = db.String, strings.Contains(version, "MariaDB")
	v, err := s.schemaVersion(ctx, q)
	switch {
	case err == nil:
		return s.checkVersion(ctx, q, v)
	case !isMySQLError(err, errNoSuchTable) && !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("read schema version from %s: %w", s.versionTable, err)
	}
	if _, err := q.ExecContext(ctx, fmt.Sprintf(leaseTableDDL, s.table)); err != nil {
		return fmt.Errorf("create lease table %s: %w", s.table, err)
	}
	if _, err := q.ExecContext(ctx, fmt.Sprintf(versionTableDDL, s.versionTable)); err != nil {
		return fmt.Errorf("create schema version table %s: %w", s.versionTable, err)
	}
	if _, err := q.ExecContext(ctx, `INSERT IGNORE INTO `+s.versionTable+` (id, version) VALUES (1, ?)`, SchemaVersion); err != nil {
		return fmt.Errorf("record schema version in %s: %w", s.versionTable, err)
	}
	if v, err = s.schemaVersion(ctx, q); err != nil {
		return fmt.Errorf("read schema version from %s: %w", s.versionTable, err)
	}
	return s.checkVersion(ctx, q, v)
}

func (s *Store) schemaVersion(ctx context.Context, q querier) (int, error) {
	var v int
	err := q.QueryRowContext(ctx, `SELECT version FROM `+s.versionTable+` WHERE id = 1`).Scan(&v)
	return v, err
}

// checkVersion checks the recorded version v and that the lease table has
// the columns the store uses.
func (s *Store) checkVersion(ctx context.Context, q querier, v int) error {
	if v > SchemaVersion {
		return fmt.Errorf("%w: %s records version %d, this mysqllease knows up to %d; upgrade leaderaware",
			ErrSchemaTooNew, s.versionTable, v, SchemaVersion)
	}
	_, err := q.ExecContext(ctx, `SELECT name, holder, token, version, ttl_us, released, written_at FROM `+s.table+` WHERE FALSE`)
	switch {
	case isMySQLError(err, errNoSuchTable):
		return fmt.Errorf("%w: %s.%s records schema version %d but the lease table %s is gone. "+
			"Restore it, or drop %s as well to start afresh (new tokens are floored at the server clock, so they still grow): %w",
			ErrTableMissing, s.database, s.versionTable, v, s.table, s.versionTable, err)
	case isMySQLError(err, errUnknownColumn):
		return fmt.Errorf("table %s exists but is not a mysqllease lease table; choose another with WithTable: %w", s.table, err)
	case err != nil:
		return fmt.Errorf("check lease table %s: %w", s.table, err)
	}
	return nil
}
