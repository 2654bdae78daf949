package sqlitelease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/leaderaware/leaderaware/internal/clock"
	"github.com/leaderaware/leaderaware/internal/sqlitesql"
)

// SchemaVersion is the version of the tables this package keeps in the file.
// Open migrates older files to it and refuses newer ones.
const SchemaVersion = 4

// The store's tables (see package sqlitesql, which holds the lease
// statements on them).
const (
	metaTable    = sqlitesql.MetaTable
	leaseTable   = sqlitesql.LeaseTable
	highWaterKey = sqlitesql.HighWaterKey
	releasesKey  = sqlitesql.ReleasesKey
)

// migrations[i] brings the schema from version i to version i+1. Its
// statements run in order inside migrate's transaction; :now is the wall
// clock in Unix milliseconds.
var migrations = [][]string{
	// Version 1: one row per lease name, never deleted, so that tokens never
	// reset. Times are Unix milliseconds by the clock of the Go process.
	{`CREATE TABLE ` + leaseTable + ` (
		name       TEXT    NOT NULL PRIMARY KEY,
		holder     TEXT    NOT NULL,
		token      INTEGER NOT NULL CHECK (token > 0),
		expires_at INTEGER NOT NULL,
		acquired_at INTEGER NOT NULL
	) STRICT, WITHOUT ROWID`},

	// Version 2: elapsed-time leases. The store keeps no expiry: a row
	// holds the holder's TTL, a version bumped by every write and a
	// released flag. A v1 row whose expiry had passed becomes released; a
	// live one keeps the time it had left as its TTL, so a candidate that
	// starts watching it now waits past the moment its v1 holder (whose
	// statements no longer work on this table) stopped trusting it.
	{
		`CREATE TABLE leaderaware_lease_v2 (
			name       TEXT    NOT NULL PRIMARY KEY,
			holder     TEXT    NOT NULL,
			token      INTEGER NOT NULL CHECK (token > 0),
			version    INTEGER NOT NULL CHECK (version > 0),
			ttl_ms     INTEGER NOT NULL CHECK (ttl_ms > 0),
			released   INTEGER NOT NULL CHECK (released IN (0, 1)),
			written_at INTEGER NOT NULL
		) STRICT, WITHOUT ROWID`,
		`INSERT INTO leaderaware_lease_v2 (name, holder, token, version, ttl_ms, released, written_at)
		SELECT name, holder, token, 1,
			min(max(expires_at - :now, 1), ` + fmt.Sprint(maxTTLMillis) + `),
			expires_at <= :now,
			min(expires_at, :now)
		FROM ` + leaseTable,
		`DROP TABLE ` + leaseTable,
		`ALTER TABLE leaderaware_lease_v2 RENAME TO ` + leaseTable,
		// The high-water mark survives the deletion of lease rows; tokens
		// also floor at the clock (see sqlitesql.Acquire), which covers a lost
		// file or a rolled-back commit.
		`INSERT INTO ` + metaTable + ` (key, value)
		SELECT '` + highWaterKey + `', coalesce(max(token), 0) FROM ` + leaseTable + ` WHERE true
		ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)`,
		`CREATE TRIGGER leaderaware_lease_token_insert AFTER INSERT ON ` + leaseTable + ` BEGIN
			INSERT INTO ` + metaTable + ` (key, value) VALUES ('` + highWaterKey + `', NEW.token)
			ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value);
		END`,
		`CREATE TRIGGER leaderaware_lease_token_update AFTER UPDATE OF token ON ` + leaseTable + ` BEGIN
			INSERT INTO ` + metaTable + ` (key, value) VALUES ('` + highWaterKey + `', NEW.token)
			ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value);
		END`,
	},

	// Version 3: the holder's liveness lock (see live.go). live_file names
	// the sidecar file the holder's Store locked ("dev:ino"), live_offset
	// the byte it locks, and live_version the version of the row they were
	// written with: they describe the holder only while the row still has
	// that version, so a write by a version-2 process, which keeps running
	// on the migrated table and leaves these columns alone, makes them
	// stale. Existing rows get NULL: unknown, the elapsed-time rule alone.
	{
		`ALTER TABLE ` + leaseTable + ` ADD COLUMN live_file TEXT`,
		`ALTER TABLE ` + leaseTable + ` ADD COLUMN live_offset INTEGER CHECK (live_offset > 0)`,
		`ALTER TABLE ` + leaseTable + ` ADD COLUMN live_version INTEGER`,
	},

	// Version 4: a count of the terms that ended, released or deleted, kept
	// by triggers next to the high-water mark, which grows with every new
	// term. A watching Store reads both, one point read, to tell a new term
	// or a release by another process (which candidates must see at once)
	// from a renewal (which they may see at their next regular read). It
	// costs a release one more page write. Each term is released once
	// (Release matches NOT released), and no other statement sets released
	// to 1; a deleted row that was not released ends its term too.
	{
		`INSERT INTO ` + metaTable + ` (key, value) VALUES ('` + releasesKey + `', 0) ON CONFLICT (key) DO NOTHING`,
		`CREATE TRIGGER leaderaware_lease_release AFTER UPDATE OF released ON ` + leaseTable + `
		WHEN NEW.released AND NOT OLD.released BEGIN
			INSERT INTO ` + metaTable + ` (key, value) VALUES ('` + releasesKey + `', 1)
			ON CONFLICT (key) DO UPDATE SET value = value + 1;
		END`,
		`CREATE TRIGGER leaderaware_lease_delete AFTER DELETE ON ` + leaseTable + `
		WHEN NOT OLD.released BEGIN
			INSERT INTO ` + metaTable + ` (key, value) VALUES ('` + releasesKey + `', 1)
			ON CONFLICT (key) DO UPDATE SET value = value + 1;
		END`,
	},
}

// ErrSchemaTooNew is returned by [Open] for a file whose lease tables were
// written by a newer version of this package.
var ErrSchemaTooNew = errors.New("the lease schema is newer than this version of sqlitelease supports")

// migrate brings the schema of the file on c to [SchemaVersion] in one
// IMMEDIATE transaction, so that concurrent Opens of one file migrate it
// once, and returns the version it found. The version lives in a table of
// its own rather than PRAGMA user_version, which belongs to the jobs that
// share the file.
func migrate(ctx context.Context, c *sql.Conn) (from int, err error) {
	err = retryBusy(ctx, func() error {
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
		from = 0
		err = tx.QueryRowContext(ctx, `SELECT value FROM `+metaTable+` WHERE key = 'schema_version'`).Scan(&from)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if from > SchemaVersion {
			return fmt.Errorf("%w: the file has version %d, this package knows up to %d; upgrade github.com/leaderaware/leaderaware",
				ErrSchemaTooNew, from, SchemaVersion)
		}
		if from > 0 {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1`,
				leaseTable).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("the file records lease schema version %d in %s, but its table %s is gone (dropped); "+
					"restore the file from a backup, or delete the row 'schema_version' of %s to have Open create the table again "+
					"(new tokens stay above the old ones)", from, metaTable, leaseTable, metaTable)
			}
		}
		if from == SchemaVersion {
			return nil // Rollback: nothing was written but an existing meta table
		}
		now := sql.Named("now", clock.Wall().UnixMilli())
		for v := from; v < SchemaVersion; v++ {
			for _, stmt := range migrations[v] {
				if _, err := tx.ExecContext(ctx, stmt, now); err != nil {
					return fmt.Errorf("migrate schema from version %d to %d: %w", v, v+1, err)
				}
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+metaTable+` (key, value) VALUES ('schema_version', ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, SchemaVersion); err != nil {
			return err
		}
		return tx.Commit()
	})
	return from, err
}
