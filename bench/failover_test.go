package bench

import (
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/internal/testing/storebench"
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
		sa, sb := sqliteInstances(b, "failover.db")
		storebench.Failover(b, sa, sb, 100*time.Millisecond)
	})
	b.Run("pg", func(b *testing.B) {
		sa, sb := pgInstances(b, "bench_failover")
		storebench.Failover(b, sa, sb, 100*time.Millisecond)
	})
}
