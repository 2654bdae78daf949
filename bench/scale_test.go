//go:build unix

package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/pglease"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// scaleLeases is the number of leases one process holds in BenchmarkScale.
const scaleLeases = 1000

// defaultRenewInterval is the RenewInterval of a zero elector.Config.
const defaultRenewInterval = elector.DefaultTTL / 3

// BenchmarkScale measures what holding 1,000 leases costs one process: the
// process CPU time (getrusage RUSAGE_SELF, user + system, so the Go runtime,
// GC and the SQLite driver included) for one renewal of every lease, which
// the terms do once per RenewInterval. Goal: under 1% of one core at the
// default timings (TTL 15 s, RenewInterval 5 s).
//
//	sqlite/sweep     1,000 leases on one SQLite file, acquired with
//	                 TryAcquire; one op renews every one once, one after the
//	                 other, as their terms would (the store runs lease
//	                 operations one at a time on its lease connection).
//	                 ns/op is the wall time of a sweep.
//	sqlite/electors  1,000 LeaseElectors on one SQLite store, each holding a
//	                 term (TTL 3 s, RenewInterval 1 s, to measure faster):
//	                 one op is a 3 s window of the running terms, renewed by
//	                 the Store's one schedule. The CPU is divided by the
//	                 renewals counted in the window and scaled to 1,000.
//	                 The counting wrapper hides the store's optional
//	                 interfaces: one Renew per term. ns/op is suppressed.
//	pg/sweep,        sqlite/sweep and sqlite/electors on PostgreSQL (client
//	pg/electors      side only: the server's CPU is not counted). Skipped
//	                 unless LEADERAWARE_TEST_PG is set.
//
// Metrics: cpu-ms/sweep is the CPU time for one renewal of all 1,000 leases;
// µs-cpu/lease is that per lease; %core-at-default is cpu-ms/sweep divided
// by the default RenewInterval (5 s), in percent of one core.
func BenchmarkScale(b *testing.B) {
	ctx := context.Background()
	openSQLite := func(b *testing.B) *sqlitelease.Store {
		s, err := sqlitelease.Open(filepath.Join(b.TempDir(), "scale.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}
	b.Run("sqlite/sweep", func(b *testing.B) { benchSweep(b, openSQLite(b)) })
	b.Run("sqlite/electors", func(b *testing.B) { benchElectors(b, openSQLite(b)) })
	openPG := func(b *testing.B) *pglease.Store {
		dsn := os.Getenv("LEADERAWARE_TEST_PG")
		if dsn == "" {
			b.Skip("set LEADERAWARE_TEST_PG=postgres://user@host:5432/db?sslmode=disable to run the PostgreSQL benchmarks")
		}
		var rnd [6]byte
		_, _ = rand.Read(rnd[:])
		schema := "bench_scale_" + hex.EncodeToString(rnd[:])
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
		return s
	}
	b.Run("pg/sweep", func(b *testing.B) { benchSweep(b, openPG(b)) })
	b.Run("pg/electors", func(b *testing.B) { benchElectors(b, openPG(b)) })
}

// benchSweep acquires scaleLeases leases on s, then renews all of them once
// per op.
func benchSweep(b *testing.B, s elector.Store) {
	ctx := context.Background()
	leases := make([]elector.Lease, scaleLeases)
	for i := range leases {
		l, err := s.TryAcquire(ctx, fmt.Sprintf("scale/%04d", i), "scale", elector.DefaultTTL, elector.Lease{})
		if err != nil {
			b.Fatal(err)
		}
		leases[i] = l
	}
	c0 := processCPU(b)
	for b.Loop() {
		for i, l := range leases {
			l, err := s.Renew(ctx, l, elector.DefaultTTL)
			if err != nil {
				b.Fatal(err)
			}
			leases[i] = l
		}
	}
	reportCPU(b, (processCPU(b)-c0)/time.Duration(b.N))
	for _, l := range leases {
		if err := s.Release(ctx, l); err != nil {
			b.Fatal(err)
		}
	}
}

// benchElectors runs scaleLeases LeaseElectors on s, each holding a term,
// and measures the CPU per renewal while they renew.
func benchElectors(b *testing.B, s elector.Store) {
	c := &renewCounter{Store: s}
	cfg := elector.Config{TTL: 3 * time.Second, RenewInterval: time.Second, Holder: "scale"}
	terms := holdTerms(b, c, "scale", cfg)
	var cpu time.Duration
	var renewals int64
	for b.Loop() {
		r0, c0 := c.renews.Load(), processCPU(b)
		time.Sleep(3 * cfg.RenewInterval)
		cpu += processCPU(b) - c0
		renewals += c.renews.Load() - r0
	}
	for _, t := range terms {
		select {
		case <-t.Done():
			b.Fatalf("a term ended while renewing: %v", t.Err())
		default:
		}
	}
	if renewals == 0 {
		b.Fatal("no renewal in the window")
	}
	b.ReportMetric(0, "ns/op")
	reportCPU(b, cpu*scaleLeases/time.Duration(renewals))
	b.ReportMetric(float64(renewals)/float64(b.N), "renewals/op")
}

// holdTerms campaigns for scaleLeases leases named prefix/NNNN on s with
// cfg and returns the terms won, which it resigns when b ends.
func holdTerms(b *testing.B, s elector.Store, prefix string, cfg elector.Config) []elector.Term {
	ctx := context.Background()
	terms := make([]elector.Term, 0, scaleLeases)
	b.Cleanup(func() {
		for _, t := range terms {
			if err := t.Resign(ctx); err != nil {
				b.Error(err)
			}
		}
	})
	for i := range scaleLeases {
		e, err := elector.New(s, fmt.Sprintf("%s/%04d", prefix, i), cfg)
		if err != nil {
			b.Fatal(err)
		}
		t, err := e.Campaign(ctx)
		if err != nil {
			b.Fatal(err)
		}
		terms = append(terms, t)
	}
	return terms
}

// reportCPU reports the CPU time of one renewal of scaleLeases leases.
func reportCPU(b *testing.B, perSweep time.Duration) {
	b.ReportMetric(float64(perSweep)/float64(time.Millisecond), "cpu-ms/sweep")
	b.ReportMetric(float64(perSweep)/float64(time.Microsecond)/scaleLeases, "µs-cpu/lease")
	b.ReportMetric(float64(perSweep)/float64(defaultRenewInterval)*100, "%core-at-default")
}

// processCPU returns the user and system CPU time of this process so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// renewCounter counts the renewals of a Store.
type renewCounter struct {
	elector.Store
	renews atomic.Int64
}

func (c *renewCounter) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	c.renews.Add(1)
	return c.Store.Renew(ctx, l, ttl)
}
