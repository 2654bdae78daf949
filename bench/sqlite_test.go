package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// BenchmarkSQLiteStore measures each sqlitelease operation against the
// floor: the same SQL statements, prepared once and run bare on one
// connection of the store's own pool (same file, same pragmas). The store
// should cost at most 1.3× its floor. Writes with RETURNING run to
// completion in both (see sqliteScanOne), as they must.
//
//	go test -run '^$' -bench SQLite -benchmem ./bench/
//
// Sub-benchmarks, each as store and sql:
//
//	acquire       TryAcquire of an expired lease: the upsert takes it over
//	acquire-held  TryAcquire of a live lease (what waiting candidates do): the upsert, then a read
//	renew         Renew of the live lease: one UPDATE … RETURNING
//	get           Get: one SELECT
func BenchmarkSQLiteStore(b *testing.B) {
	ctx := context.Background()
	s, err := sqlitelease.Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })

	// The statements sqlitelease runs (see sqlitelease/store.go).
	const (
		sqlAcquire = `INSERT INTO leaderaware_lease (name, holder, token, expires_at, acquired_at)
VALUES (?1, ?2, 1, ?4, ?3)
ON CONFLICT (name) DO UPDATE SET
	holder = excluded.holder,
	token = token + 1,
	expires_at = excluded.expires_at,
	acquired_at = excluded.acquired_at
WHERE expires_at <= ?3
RETURNING token, expires_at`
		sqlGet = `SELECT holder, token, expires_at FROM leaderaware_lease
WHERE name = ?1 AND expires_at > ?2`
		sqlRenew = `UPDATE leaderaware_lease SET expires_at = ?5
WHERE name = ?1 AND holder = ?2 AND token = ?3 AND expires_at > ?4
RETURNING expires_at`
	)
	conn, err := s.DB().Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	prepare := func(query string) *sql.Stmt {
		st, err := conn.PrepareContext(ctx, query)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		return st
	}
	stAcquire, stGet, stRenew := prepare(sqlAcquire), prepare(sqlGet), prepare(sqlRenew)

	const (
		// Store time has millisecond resolution, so a lease cannot expire
		// between two back-to-back acquires. The acquire benchmarks cycle
		// through this many leases of a 1 ms TTL instead: by the time the
		// cycle returns to one, thousands of operations later, it has expired.
		cycle    = 4096
		expiring = time.Millisecond
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
		holder           string
		token, expiresAt int64
	)
	sqlAcquireOnce := func(name, holder string, ttl time.Duration) error {
		now := time.Now().UnixMilli()
		rows, err := stAcquire.QueryContext(ctx, name, holder, now, now+ttl.Milliseconds())
		return sqliteScanOne(rows, err, &token, &expiresAt)
	}

	b.Run("acquire/store", func(b *testing.B) {
		ns := names("acquire/store")
		for _, n := range ns { // every lease exists and expires at once
			if _, err := s.TryAcquire(ctx, n, "h", expiring); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(2 * expiring)
		i := 0
		for b.Loop() {
			if _, err := s.TryAcquire(ctx, ns[i%cycle], "h", expiring); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("acquire/sql", func(b *testing.B) {
		ns := names("acquire/sql")
		for _, n := range ns {
			if err := sqlAcquireOnce(n, "h", expiring); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(2 * expiring)
		i := 0
		for b.Loop() {
			if err := sqlAcquireOnce(ns[i%cycle], "h", expiring); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})

	held, err := s.TryAcquire(ctx, "held", "leader", long)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("acquire-held/store", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.TryAcquire(ctx, "held", "candidate", long); !errors.Is(err, elector.ErrHeld) {
				b.Fatalf("TryAcquire of a held lease: %v, want ErrHeld", err)
			}
		}
	})
	b.Run("acquire-held/sql", func(b *testing.B) {
		for b.Loop() {
			if err := sqlAcquireOnce("held", "candidate", long); !errors.Is(err, sql.ErrNoRows) {
				b.Fatalf("upsert of a held lease: %v, want no row", err)
			}
			if err := stGet.QueryRowContext(ctx, "held", time.Now().UnixMilli()).Scan(&holder, &token, &expiresAt); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("renew/store", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Renew(ctx, held, long); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("renew/sql", func(b *testing.B) {
		for b.Loop() {
			now := time.Now().UnixMilli()
			rows, err := stRenew.QueryContext(ctx, held.Name, held.Holder, int64(held.Token), now, now+long.Milliseconds())
			if err := sqliteScanOne(rows, err, &expiresAt); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("get/store", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Get(ctx, "held"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get/sql", func(b *testing.B) {
		for b.Loop() {
			if err := stGet.QueryRowContext(ctx, "held", time.Now().UnixMilli()).Scan(&holder, &token, &expiresAt); err != nil {
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
