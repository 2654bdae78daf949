package sqlitelease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/leaderaware/leaderaware/internal/clock"
	"github.com/leaderaware/leaderaware/internal/sqlitesql"
)

// SchemaVersion is the version of the store's tables; Open migrates older
// files and refuses newer ones.
const SchemaVersion = 4

const (
	metaTable    = sqlitesql.MetaTable
	leaseTable   = sqlitesql.LeaseTable
	highWaterKey = sqlitesql.HighWaterKey
	releasesKey  = sqlitesql.ReleasesKey
)

// migrations[i] brings the schema from version i to i+1, in migrate's
// transaction; :now is the wall clock in Unix ms.
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

	// Version 2: elapsed-time leases. A live v1 row keeps the time it had
	// left as its TTL, so that candidates wait out its v1 holder.
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

	// Version 3: the holder's liveness lock (file "dev:ino" and byte), valid
	// while the row keeps live_version (a v2 writer leaves them stale).
	{
		`ALTER TABLE ` + leaseTable + ` ADD COLUMN live_file TEXT`,
		`ALTER TABLE ` + leaseTable + ` ADD COLUMN live_offset INTEGER CHECK (live_offset > 0)`,
		`ALTER TABLE ` + leaseTable + ` ADD COLUMN live_version INTEGER`,
	},

	// Version 4: the count of terms that ended (released, or their row
	// deleted), which Notify reads with the high-water mark to tell new
	// terms and releases from renewals.
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

// ErrSchemaTooNew is returned by [Open] for a file whose lease tables a newer
// version of this package wrote.
var ErrSchemaTooNew = errors.New("the lease schema is newer than this version of sqlitelease supports")

// migrate brings the schema on c to [SchemaVersion] in one IMMEDIATE
// transaction, so that concurrent Opens migrate once, and returns the
// version it found.
func migrate(ctx context.Context, c *sql.Conn, clk clock.Clock) (from int, err error) {
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
		now := sql.Named("now", clk.Wall().UnixMilli())
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
