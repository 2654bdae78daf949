package sqlitelease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// SchemaVersion is the version of the tables this package keeps in the file.
// Open migrates older files to it and refuses newer ones.
const SchemaVersion = 1

// The store's tables. Their names carry a prefix because jobs keep their own
// tables in the same file (see [Store.Fenced]).
const (
	metaTable  = "leaderaware_meta"
	leaseTable = "leaderaware_lease"
)

// migrations[i] brings the schema from version i to version i+1.
var migrations = []string{
	// Version 1: one row per lease name, never deleted, so that tokens never
	// reset. Times are Unix milliseconds by the clock of the Go process.
	`CREATE TABLE ` + leaseTable + ` (
		name       TEXT    NOT NULL PRIMARY KEY,
		holder     TEXT    NOT NULL,
		token      INTEGER NOT NULL CHECK (token > 0),
		expires_at INTEGER NOT NULL,
		acquired_at INTEGER NOT NULL
	) STRICT, WITHOUT ROWID`,
}

// ErrSchemaTooNew is returned by [Open] for a file whose lease tables were
// written by a newer version of this package.
var ErrSchemaTooNew = errors.New("the lease schema is newer than this version of sqlitelease supports")

// migrate brings the schema of the file on c to [SchemaVersion] in one
// IMMEDIATE transaction, so that concurrent Opens of one file migrate it
// once. The version lives in a table of its own rather than PRAGMA
// user_version, which belongs to the jobs that share the file.
func migrate(ctx context.Context, c *sql.Conn) error {
	return retryBusy(ctx, func() error {
		tx, err := c.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // a no-op after Commit
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+metaTable+` (
			key   TEXT NOT NULL PRIMARY KEY,
			value ANY
		) STRICT, WITHOUT ROWID`); err != nil {
			return err
		}
		var version int
		err = tx.QueryRowContext(ctx, `SELECT value FROM `+metaTable+` WHERE key = 'schema_version'`).Scan(&version)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if version > SchemaVersion {
			return fmt.Errorf("%w: the file has version %d, this package knows up to %d; upgrade github.com/leaderaware/leaderaware",
				ErrSchemaTooNew, version, SchemaVersion)
		}
		if version == SchemaVersion {
			return nil // Rollback: nothing was written but an existing meta table
		}
		for v := version; v < SchemaVersion; v++ {
			if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
				return fmt.Errorf("migrate schema from version %d to %d: %w", v, v+1, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+metaTable+` (key, value) VALUES ('schema_version', ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, SchemaVersion); err != nil {
			return err
		}
		return tx.Commit()
	})
}
