package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/sqlitesql"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// sqliteAcquireInTx is whether sqlitelease runs its acquire statement in a
// transaction of its own: on Linux, where it keeps a token high-water mark in
// its liveness file (Store.issue in sqlitelease/store.go).
const sqliteAcquireInTx = runtime.GOOS == "linux"

// sqliteLiveFile and sqliteLiveOffset stand for the liveness record (the
// sidecar file's "dev:ino" and the byte a Store locks) that the store's
// statements write with every acquire and renew.
const (
	sqliteLiveFile   = "2049:1311234"
	sqliteLiveOffset = int64(1) << 40
)

// The model sqlitelease replaced (expiry timestamps compared with the Go
// process's clock), as of commit aa3ab47: the table of migrations[0] in
// sqlitelease/schema.go, renamed so that it can live in the store's own
// file, and the constants acquireSQL, getSQL and renewSQL of
// sqlitelease/store.go on it (git show aa3ab47:sqlitelease/store.go).
const (
	sqliteV1Table = `CREATE TABLE bench_lease_v1 (
		name       TEXT    NOT NULL PRIMARY KEY,
		holder     TEXT    NOT NULL,
		token      INTEGER NOT NULL CHECK (token > 0),
		expires_at INTEGER NOT NULL,
		acquired_at INTEGER NOT NULL
	) STRICT, WITHOUT ROWID`
	sqliteV1Acquire = `INSERT INTO bench_lease_v1 (name, holder, token, expires_at, acquired_at)
VALUES (?1, ?2, 1, ?4, ?3)
ON CONFLICT (name) DO UPDATE SET
	holder = excluded.holder,
	token = token + 1,
	expires_at = excluded.expires_at,
	acquired_at = excluded.acquired_at
WHERE expires_at <= ?3
RETURNING token, expires_at`
	sqliteV1Get = `SELECT holder, token, expires_at FROM bench_lease_v1
WHERE name = ?1 AND expires_at > ?2`
	sqliteV1Renew = `UPDATE bench_lease_v1 SET expires_at = ?5
WHERE name = ?1 AND holder = ?2 AND token = ?3 AND expires_at > ?4
RETURNING expires_at`
)

// BenchmarkSQLiteStore measures each sqlitelease operation (impl=store)
// against two baselines, all on the store's own file (same pragmas):
//
//	impl=sql    the statements the store runs for the operation (the very
//	            text, from package internal/sqlitesql), prepared once and run
//	            bare on one connection of the store's pool (on Linux the
//	            acquire in an IMMEDIATE transaction, as the store runs it):
//	            the floor. Goal: the store costs at most 1.3× it.
//	impl=v1     the statements of the model the store replaced (expiry
//	            timestamps, commit aa3ab47), run bare the same way on a table
//	            of the old layout, in the order the old store ran them: what
//	            a lease operation cost before. Goal: the new model costs at
//	            most 1.1× it.
//
// Writes with RETURNING run to completion in all three (see sqliteScanOne),
// as they must. Compare the columns with
//
//	go test -run '^$' -bench SQLiteStore -count=6 ./bench/ > sqlite.txt
//	benchstat -col /impl sqlite.txt
//
// Sub-benchmarks:
//
//	acquire       a takeover: TryAcquire of the lease the candidate observed
//	              (v1: of an expired lease); the upsert takes it over
//	acquire-held  TryAcquire of a lease held by another Store, observing
//	              nothing (what waiting candidates do): a read of the lease,
//	              which names its live holder; on Linux the store also tests
//	              the holder's liveness byte (not SQL, not in impl=sql). v1
//	              ran its upsert, which returned no row, then the read.
//	renew         Renew of the held lease (by the holding Store): one
//	              UPDATE … RETURNING
//	get           Get: one SELECT
func BenchmarkSQLiteStore(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "bench.db")
	open := func() *sqlitelease.Store {
		s, err := sqlitelease.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}
	// s is the candidate; leader, another Store on the file (another
	// process, as far as the liveness lock goes), holds the lease "held".
	s, leader := open(), open()

	conn, err := s.DB().Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	if _, err := conn.ExecContext(ctx, sqliteV1Table); err != nil {
		b.Fatal(err)
	}
	prepare := func(query string) *sql.Stmt {
		st, err := conn.PrepareContext(ctx, query)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		return st
	}
	stAcquire, stGet, stGetLive, stRenew := prepare(sqlitesql.Acquire), prepare(sqlitesql.Get), prepare(sqlitesql.GetLive),
		prepare(sqlitesql.Renew)
	stBegin, stCommit, stRollback := prepare("BEGIN IMMEDIATE"), prepare("COMMIT"), prepare("ROLLBACK")
	v1Acquire, v1Get, v1Renew := prepare(sqliteV1Acquire), prepare(sqliteV1Get), prepare(sqliteV1Renew)

	const (
		// Every acquire benchmark cycles through this many leases, so that
		// the three work on tables of about the same size. v1 needs it:
		// its time has millisecond resolution, so a lease of 1 ms TTL
		// cannot expire between two back-to-back acquires; by the time the
		// cycle returns to one, thousands of operations later, it has.
		cycle    = 4096
		expiring = time.Millisecond // v1
		long     = time.Hour
	)
	names := func(prefix string) []string {
		ns := make([]string, cycle)
		for i := range ns {
			ns[i] = fmt.Sprintf("%s/%d", prefix, i)
		}
		return ns
	}
	var (
		holder                              string
		token, version, ttlMs, written, exp int64
		liveFile                            sql.NullString
		liveOffset                          sql.NullInt64
	)
	// sqlAcquire runs the new upsert as the store does (observed is the
	// lease the candidate watched; zero: none): on Linux inside an
	// IMMEDIATE transaction that commits if the upsert won and rolls back
	// if it did not (Store.issue and leaseConn.writeTx in
	// sqlitelease/store.go; the store also locks, reads and raises the
	// token high-water mark of its liveness file inside it, which is not
	// SQL and not part of this floor).
	sqlAcquire := func(name, candidate string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
		if sqliteAcquireInTx {
			if _, err := stBegin.ExecContext(ctx); err != nil {
				return elector.Lease{}, err
			}
		}
		now := time.Now()
		rows, err := stAcquire.QueryContext(ctx, name, candidate, ttl.Milliseconds(), int64(observed.Token), int64(observed.Version),
			now.UnixMicro(), now.UnixMilli(), sqliteLiveFile, sqliteLiveOffset)
		err = sqliteScanOne(rows, err, &token, &version)
		if sqliteAcquireInTx {
			end := stCommit
			if err != nil {
				end = stRollback
			}
			if _, err := end.ExecContext(ctx); err != nil {
				return elector.Lease{}, err
			}
		}
		if err != nil {
			return elector.Lease{}, err
		}
		return elector.Lease{Name: name, Holder: candidate, Token: uint64(token), Version: uint64(version), TTL: ttl}, nil
	}
	sqlGet := func(name string) error {
		return stGet.QueryRowContext(ctx, name).Scan(&holder, &token, &version, &ttlMs, &written)
	}
	sqlGetLive := func(name string) error {
		return stGetLive.QueryRowContext(ctx, name).Scan(&holder, &token, &version, &ttlMs, &written, &liveFile, &liveOffset)
	}
	v1AcquireOnce := func(name, candidate string, ttl time.Duration) error {
		now := time.Now().UnixMilli()
		rows, err := v1Acquire.QueryContext(ctx, name, candidate, now, now+ttl.Milliseconds())
		return sqliteScanOne(rows, err, &token, &exp)
	}
	v1GetOnce := func(name string) error {
		return v1Get.QueryRowContext(ctx, name, time.Now().UnixMilli()).Scan(&holder, &token, &exp)
	}

	b.Run("acquire/impl=v1", func(b *testing.B) {
		ns := names("acquire/v1")
		for _, n := range ns { // every lease exists and expires at once
			if err := v1AcquireOnce(n, "h", expiring); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(2 * expiring)
		i := 0
		for b.Loop() {
			if err := v1AcquireOnce(ns[i%cycle], "h", expiring); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("acquire/impl=store", benchTakeover(names("acquire/store"), func(name string, observed elector.Lease) (elector.Lease, error) {
		return s.TryAcquire(ctx, name, "h", long, observed)
	}))
	b.Run("acquire/impl=sql", benchTakeover(names("acquire/sql"), func(name string, observed elector.Lease) (elector.Lease, error) {
		return sqlAcquire(name, "h", long, observed)
	}))

	held, err := leader.TryAcquire(ctx, "held", "leader", long, elector.Lease{})
	if err != nil {
		b.Fatal(err)
	}
	if err := v1AcquireOnce("held", "leader", long); err != nil {
		b.Fatal(err)
	}
	v1HeldToken := token
	b.Run("acquire-held/impl=v1", func(b *testing.B) {
		for b.Loop() {
			if err := v1AcquireOnce("held", "candidate", long); !errors.Is(err, sql.ErrNoRows) {
				b.Fatalf("upsert of a held lease: %v, want no row", err)
			}
			if err := v1GetOnce("held"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("acquire-held/impl=store", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.TryAcquire(ctx, "held", "candidate", long, elector.Lease{}); !errors.Is(err, elector.ErrHeld) {
				b.Fatalf("TryAcquire of a held lease: %v, want ErrHeld", err)
			}
		}
	})
	b.Run("acquire-held/impl=sql", func(b *testing.B) {
		for b.Loop() {
			if err := sqlGetLive("held"); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("renew/impl=v1", func(b *testing.B) {
		// Each renewal must change the row, as real ones (RenewInterval
		// apart) do: SQLite skips the write of a row updated to the bytes
		// it already has, and renewals back to back in one millisecond
		// would all set the same expires_at. The new model's version bump
		// always changes the row.
		var n int64
		for b.Loop() {
			now := time.Now().UnixMilli()
			n++
			rows, err := v1Renew.QueryContext(ctx, "held", "leader", v1HeldToken, now, now+long.Milliseconds()+n)
			if err := sqliteScanOne(rows, err, &exp); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("renew/impl=store", func(b *testing.B) {
		for b.Loop() {
			if _, err := leader.Renew(ctx, held, long); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("renew/impl=sql", func(b *testing.B) {
		for b.Loop() {
			rows, err := stRenew.QueryContext(ctx, held.Name, held.Holder, int64(held.Token), long.Milliseconds(), time.Now().UnixMilli(),
				sqliteLiveFile, sqliteLiveOffset)
			if err := sqliteScanOne(rows, err, &version); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("get/impl=v1", func(b *testing.B) {
		for b.Loop() {
			if err := v1GetOnce("held"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get/impl=store", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Get(ctx, "held"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get/impl=sql", func(b *testing.B) {
		for b.Loop() {
			if err := sqlGet("held"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// sqliteScanOne scans the one row of a write with RETURNING and steps the
// statement to completion, as sqlitelease does. QueryRow would stop after
// the row: SQLite then commits in the statement's reset, which skips the WAL
// auto-checkpoint, and the WAL grows by every write (a cheaper but wrong
// floor).
func sqliteScanOne(rows *sql.Rows, err error, dest ...any) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return rows.Close()
}
