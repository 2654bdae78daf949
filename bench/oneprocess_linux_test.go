package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/storebench"
	"github.com/leaderaware/leaderaware/pglease"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// BenchmarkOneProcess measures the client side of 1,000 leases at the
// default timings (TTL 15 s, RenewInterval 5 s, RetryInterval 2 s) in one
// process: one Store instance holds every lease, with one elector per lease,
// and another instance on the same leases watches every one, with one
// campaigning elector per lease (see storebench.ClientCPU). Goal: under 1%
// of a core, client side, with no acquires/s while the holders renew.
//
//	memory  two instances of one elector.MemoryStore (the elector's own
//	        cost, without a database)
//	sqlite  two Opens of one file in b.TempDir()
//	pg      two Opens of one fresh schema, dropped at the end; skipped
//	        unless LEADERAWARE_TEST_PG is set
//
// Metrics: %core (this process's CPU time over the window), renews/s and
// acquires/s (the terms' renewals, batched or not, and the waiting
// candidates' TryAcquires); ns/op is suppressed.
func BenchmarkOneProcess(b *testing.B) {
	b.Run("memory", func(b *testing.B) {
		mem := elector.NewMemoryStore()
		storebench.ClientCPU(b, mem, memoryInstance{mem}, nil)
	})
	b.Run("sqlite", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "oneprocess.db")
		open := func() *sqlitelease.Store {
			s, err := sqlitelease.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		}
		storebench.ClientCPU(b, open(), open(), nil)
	})
	b.Run("pg", func(b *testing.B) {
		dsn := os.Getenv("LEADERAWARE_TEST_PG")
		if dsn == "" {
			b.Skip("set LEADERAWARE_TEST_PG=postgres://user@host:5432/db?sslmode=disable to run the PostgreSQL benchmarks")
		}
		ctx := context.Background()
		var rnd [6]byte
		_, _ = rand.Read(rnd[:])
		schema := "bench_oneprocess_" + hex.EncodeToString(rnd[:])
		open := func() *pglease.Store {
			s, err := pglease.Open(ctx, dsn, pglease.WithSchema(schema))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		}
		sa, sb := open(), open()
		b.Cleanup(func() { // runs before the Closes above
			if _, err := sa.Pool().Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
				b.Errorf("drop schema %s: %v", schema, err)
			}
		})
		storebench.ClientCPU(b, sa, sb, nil)
	})
}

// memoryInstance is a second instance of a memory store on the same
// leases, as a second Open of one database is: the elector gives each
// Store value a watch and a renewal schedule of its own.
type memoryInstance struct{ *elector.MemoryStore }
