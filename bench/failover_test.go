package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/storebench"
	"github.com/leaderaware/leaderaware/pglease"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// BenchmarkFailover measures, on the real clock, how long a lease takes to
// pass from one process to another, with TTL 1.5s, RenewInterval 0.5s and
// RetryInterval 0.5s. Two processes are stood in for by two LeaseElectors
// on two Store instances (two *sql.DB on one SQLite file; two pools and two
// LISTEN connections on one PostgreSQL database), so the waiting candidate
// hears of the lease only the way another process would: the SQLite
// store's data_version poller and its own reads every RetryInterval, or
// the PostgreSQL store's lease watcher (one batched read every
// RetryInterval) and NOTIFY. A's SQLite Store stays open through its
// "crash", with its liveness lock held, so the SQLite crash case measures
// the elapsed-time rule, as between hosts (or a frozen holder);
// BenchmarkSQLiteCrashFailover measures a real process death, which the
// liveness lock reveals at once.
//
//	handoff  A holds a term, B campaigns and is told the lease is held; at a
//	         random moment 0–100 ms later (the release meets the SQLite
//	         store's 20 ms data_version poll at any phase) A's term.Resign
//	         is called; ms/handoff is the time from that call to B's
//	         Campaign returning with a term.
//	crash    A holds and renews a term, B campaigns and watches it, A
//	         crashes: its store refuses every call from then on, and its
//	         term is abandoned. ms/failover is the time from the start of
//	         A's last successful write to B's Campaign returning (goal: at
//	         most TTL + RetryInterval, 2,000 ms); ms/after-crash from the
//	         crash.
//
// storebench.Failover, which the etcd and MySQL stores' modules run too,
// says how each round goes.
//
// Each b.Loop iteration runs a fixed number of rounds: 7 handoffs (about
// 0.1 s each) or 3 crashes (about 3.5 s each). At the default -benchtime=1s
// b.Loop stops after the iteration that passes 1 s: one iteration of crash,
// one or two of handoff; about 25 s for the four sub-benchmarks.
// -benchtime=Nx runs exactly N iterations, N times the rounds. The metrics
// are the median (ms/handoff, ms/failover, ms/after-crash) and the largest
// (max-ms/…) over every round of the run; ns/op is suppressed (it would be
// the sum of the rounds). The PostgreSQL cases are skipped unless
// LEADERAWARE_TEST_PG is set; they use a schema of their own, dropped at the
// end.
func BenchmarkFailover(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "failover.db")
		open := func() *sqlitelease.Store {
			s, err := sqlitelease.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		}
		storebench.Failover(b, notifyWatch{open()}, notifyWatch{open()}, 100*time.Millisecond)
	})
	b.Run("pg", func(b *testing.B) {
		dsn := os.Getenv("LEADERAWARE_TEST_PG")
		if dsn == "" {
			b.Skip("set LEADERAWARE_TEST_PG=postgres://user@host:5432/db?sslmode=disable to run the PostgreSQL benchmarks")
		}
		ctx := context.Background()
		var rnd [6]byte
		_, _ = rand.Read(rnd[:])
		schema := "bench_failover_" + hex.EncodeToString(rnd[:])
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
		storebench.Failover(b, sa, sb, 100*time.Millisecond)
	})
}

// notifyWatch gives storebench the WatchRelease it asks for, from the
// store's Notify (spurious wake-ups are allowed), until storebench takes
// the core's watch interfaces.
type notifyWatch struct{ *sqlitelease.Store }

func (s notifyWatch) WatchRelease(name string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	return ch, s.Notify(func(c elector.Change) {
		if c.Name == "" || c.Name == name {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	})
}
