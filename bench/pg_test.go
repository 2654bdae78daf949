package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/pgsql"
	"github.com/leaderaware/leaderaware/pglease"
)

// BenchmarkPGStore measures each pglease operation (impl=store) against two
// baselines, run on the store's Pool (the store runs its lease statements on
// a small pool of its own with the same connection settings), in a schema of
// its own that it drops at the end:
//
//	impl=sql    the statements the store runs (internal/pgsql, the same
//	            text), run bare in the same order: the floor. Goal: the
//	            store costs at most 1.3× it; the rest is the server round
//	            trip.
//	impl=v1     the statements of the model the store replaced (expiry
//	            timestamps by the server's now(), commit aa3ab47), run bare
//	            on a table of the old layout, in the order the old store ran
//	            them: what a lease operation cost before. Goal: the new
//	            model costs at most 1.1× it.
//
//	LEADERAWARE_TEST_PG=postgres://... go test -run '^$' -bench PGStore -count=6 ./bench/ > pg.txt
//	benchstat -col /impl pg.txt
//
// Sub-benchmarks:
//
//	acquire       a takeover: TryAcquire of the lease the candidate observed,
//	              one statement, the compare-and-set (v1: of an expired
//	              lease, a SELECT, then the upsert)
//	acquire-held  TryAcquire of a lease held by another, without an
//	              observed lease (what waiting candidates do): the SELECT of
//	              Get, which answers it (v1: its SELECT only)
//	renew         Renew of the held lease: one UPDATE
//	get           Get: one SELECT
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
	v1Table := pgx.Identifier{schema, "bench_lease_v1"}.Sanitize()

	// The statements pglease runs, the very text of its store.
	st := pgsql.For(table)
	// The model pglease replaced, as of commit aa3ab47: the table of
	// migrations[0] in pglease/schema.go, and sqlRead, sqlUpsert, sqlRenew
	// and sqlGet as Store.prepareSQL in pglease/store.go set them (git show
	// aa3ab47:pglease/store.go).
	var (
		v1Create = `CREATE TABLE ` + v1Table + ` (
		name        text        PRIMARY KEY,
		holder      text        NOT NULL,
		token       bigint      NOT NULL CHECK (token > 0),
		expires_at  timestamptz NOT NULL,
		acquired_at timestamptz NOT NULL,
		renewed_at  timestamptz NOT NULL
	)`
		v1Read   = `SELECT holder, token, expires_at, expires_at > now() FROM ` + v1Table + ` WHERE name = $1`
		v1Upsert = `WITH locked AS (SELECT name FROM ` + v1Table + ` WHERE name = $1 FOR UPDATE NOWAIT)
INSERT INTO ` + v1Table + ` AS l (name, holder, token, expires_at, acquired_at, renewed_at)
SELECT $1, $2, 1, now() + $3::bigint * interval '1 microsecond', now(), now()
WHERE (SELECT count(*) FROM locked) >= 0
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, token = l.token + 1,
	expires_at = excluded.expires_at, acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at
WHERE l.expires_at <= now()
RETURNING token, expires_at`
		v1Renew = `UPDATE ` + v1Table + ` SET expires_at = now() + $4::bigint * interval '1 microsecond', renewed_at = now()
WHERE name = $1 AND holder = $2 AND token = $3 AND expires_at > now()
RETURNING expires_at`
		v1Get = `SELECT holder, token, expires_at FROM ` + v1Table + ` WHERE name = $1 AND expires_at > now()`
	)
	if _, err := pool.Exec(ctx, v1Create); err != nil {
		b.Fatal(err)
	}

	const (
		expiring = time.Microsecond // v1: every acquire finds the lease of the one before expired
		long     = time.Hour
	)
	var (
		won                   bool
		holder                string
		token, version, ttlUS int64
		written, expiresAt    time.Time
		live                  bool
	)
	// pgAcquire runs what TryAcquire runs (observed: the lease the
	// candidate watched, zero for none): without an observed lease the read
	// of Get, which answers a held lease; for a free or observed lease the
	// compare-and-set. It sets won and returns the lease it won or found.
	pgAcquire := func(name, candidate string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
		if observed.Token == 0 {
			err := pool.QueryRow(ctx, st.Get, name).Scan(&holder, &token, &version, &ttlUS, &written)
			if err == nil {
				won = false
				return elector.Lease{Name: name, Holder: holder, Token: uint64(token), Version: uint64(version), TTL: time.Duration(ttlUS) * time.Microsecond}, nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return elector.Lease{}, err
			}
		}
		err := pool.QueryRow(ctx, st.Acquire, pgx.QueryExecModeExec, name, candidate, ttl.Microseconds(), int64(observed.Token), int64(observed.Version)).
			Scan(&won, &holder, &token, &version, &ttlUS, &written)
		return elector.Lease{Name: name, Holder: holder, Token: uint64(token), Version: uint64(version), TTL: time.Duration(ttlUS) * time.Microsecond}, err
	}
	v1AcquireOnce := func(name, candidate string, ttl time.Duration) error {
		err := pool.QueryRow(ctx, v1Read, name).Scan(&holder, &token, &expiresAt, &live)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		return pool.QueryRow(ctx, v1Upsert, name, candidate, ttl.Microseconds()).Scan(&token, &expiresAt)
	}

	b.Run("acquire/impl=v1", func(b *testing.B) {
		for b.Loop() {
			if err := v1AcquireOnce("acquire/v1", "h", expiring); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("acquire/impl=store", benchTakeover([]string{"acquire/store"}, func(name string, observed elector.Lease) (elector.Lease, error) {
		return s.TryAcquire(ctx, name, "h", long, observed)
	}))
	b.Run("acquire/impl=sql", benchTakeover([]string{"acquire/sql"}, func(name string, observed elector.Lease) (elector.Lease, error) {
		l, err := pgAcquire(name, "h", long, observed)
		if err == nil && !won {
			err = fmt.Errorf("acquire of lease %q, free or observed, found it held by %q", name, l.Holder)
		}
		return l, err
	}))

	held, err := s.TryAcquire(ctx, "held", "leader", long, elector.Lease{})
	if err != nil {
		b.Fatal(err)
	}
	if err := v1AcquireOnce("held", "leader", long); err != nil {
		b.Fatal(err)
	}
	v1HeldToken := token
	b.Run("acquire-held/impl=v1", func(b *testing.B) {
		for b.Loop() {
			if err := pool.QueryRow(ctx, v1Read, "held").Scan(&holder, &token, &expiresAt, &live); err != nil || !live {
				b.Fatalf("read of a held lease: %v, live %v", err, live)
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
			if _, err := pgAcquire("held", "candidate", long, elector.Lease{}); err != nil || won {
				b.Fatalf("acquire of a held lease: %v, won %v", err, won)
			}
		}
	})

	b.Run("renew/impl=v1", func(b *testing.B) {
		for b.Loop() {
			if err := pool.QueryRow(ctx, v1Renew, "held", "leader", v1HeldToken, long.Microseconds()).Scan(&expiresAt); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("renew/impl=store", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Renew(ctx, held, long); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("renew/impl=sql", func(b *testing.B) {
		for b.Loop() {
			if err := pool.QueryRow(ctx, st.Renew, held.Name, held.Holder, int64(held.Token), long.Microseconds()).Scan(&version, &ttlUS, &written); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("get/impl=v1", func(b *testing.B) {
		for b.Loop() {
			if err := pool.QueryRow(ctx, v1Get, "held").Scan(&holder, &token, &expiresAt); err != nil {
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
			if err := pool.QueryRow(ctx, st.Get, "held").Scan(&holder, &token, &version, &ttlUS, &written); err != nil {
				b.Fatal(err)
			}
		}
	})
}
