package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/pglease"
)

// BenchmarkPGStore measures each pglease operation against the floor: the
// same SQL statements, run bare on the same pool. The store should cost at
// most 1.3× its floor; the rest is the server round trip.
//
//	LEADERAWARE_TEST_PG=postgres://... go test -run '^$' -bench PG -benchmem ./bench/
//
// Sub-benchmarks, each as store and sql:
//
//	acquire       TryAcquire of an expired lease: a SELECT, then the upsert
//	acquire-held  TryAcquire of a live lease (what waiting candidates do): the SELECT only
//	renew         Renew of the live lease: one UPDATE
//	get           Get: one SELECT
//
// acquire/upsert-only is the upsert alone, the one-statement floor.
func BenchmarkPGStore(b *testing.B) {
	dsn := os.Getenv("LEADERAWARE_TEST_PG")
	if dsn == "" {
		b.Skip("set LEADERAWARE_TEST_PG=postgres://user@host:5432/db?sslmode=disable to run the PostgreSQL benchmarks")
	}
	ctx := context.Background()
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	schema := "bench_pg_" + hex.EncodeToString(rnd[:])
	s, err := pglease.Open(ctx, dsn, pglease.WithSchema(schema), pglease.WithoutListener())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if _, err := s.Pool().Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			b.Errorf("drop schema %s: %v", schema, err)
		}
		_ = s.Close()
	})
	pool, table := s.Pool(), s.Table()

	// The statements pglease runs (see pglease/store.go).
	var (
		sqlRead   = `SELECT holder, token, expires_at, expires_at > now() FROM ` + table + ` WHERE name = $1`
		sqlUpsert = `WITH locked AS (SELECT name FROM ` + table + ` WHERE name = $1 FOR UPDATE NOWAIT)
INSERT INTO ` + table + ` AS l (name, holder, token, expires_at, acquired_at, renewed_at)
SELECT $1, $2, 1, now() + $3::bigint * interval '1 microsecond', now(), now()
WHERE (SELECT count(*) FROM locked) >= 0
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, token = l.token + 1,
	expires_at = excluded.expires_at, acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at
WHERE l.expires_at <= now()
RETURNING token, expires_at`
		sqlRenew = `UPDATE ` + table + ` SET expires_at = now() + $4::bigint * interval '1 microsecond', renewed_at = now()
WHERE name = $1 AND holder = $2 AND token = $3 AND expires_at > now()
RETURNING expires_at`
		sqlGet = `SELECT holder, token, expires_at FROM ` + table + ` WHERE name = $1 AND expires_at > now()`
	)
	const (
		expiring = time.Microsecond // every acquire finds the lease of the one before expired
		long     = time.Hour
	)
	var (
		holder    string
		token     int64
		expiresAt time.Time
		live      bool
	)

	b.Run("acquire/store", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.TryAcquire(ctx, "acquire/store", "h", expiring); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("acquire/sql", func(b *testing.B) {
		for b.Loop() {
			err := pool.QueryRow(ctx, sqlRead, "acquire/sql").Scan(&holder, &token, &expiresAt, &live)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				b.Fatal(err)
			}
			if err := pool.QueryRow(ctx, sqlUpsert, "acquire/sql", "h", expiring.Microseconds()).Scan(&token, &expiresAt); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("acquire/upsert-only", func(b *testing.B) {
		for b.Loop() {
			if err := pool.QueryRow(ctx, sqlUpsert, "acquire/upsert-only", "h", expiring.Microseconds()).Scan(&token, &expiresAt); err != nil {
				b.Fatal(err)
			}
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
			if err := pool.QueryRow(ctx, sqlRead, "held").Scan(&holder, &token, &expiresAt, &live); err != nil || !live {
				b.Fatalf("read of a held lease: %v, live %v", err, live)
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
			if err := pool.QueryRow(ctx, sqlRenew, held.Name, held.Holder, int64(held.Token), long.Microseconds()).Scan(&expiresAt); err != nil {
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
			if err := pool.QueryRow(ctx, sqlGet, "held").Scan(&holder, &token, &expiresAt); err != nil {
				b.Fatal(err)
			}
		}
	})
}
