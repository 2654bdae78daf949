package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/pglease"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// failoverConfig are the timings of BenchmarkFailover.
var failoverConfig = elector.Config{
	TTL:           1500 * time.Millisecond,
	RenewInterval: 500 * time.Millisecond,
	RetryInterval: 500 * time.Millisecond,
}

// Samples per b.Loop iteration: every iteration takes up to seconds of real
// time, so at the default -benchtime=1s b.Loop runs one iteration, and each
// sub-benchmark still yields a median of several samples.
const (
	handoffRounds = 7
	crashRounds   = 3
)

// BenchmarkFailover measures, on the real clock, how long a lease takes to
// pass from one process to another, with TTL 1.5s, RenewInterval 0.5s and
// RetryInterval 0.5s. Two processes are stood in for by two LeaseElectors
// on two Store instances (two *sql.DB on one SQLite file; two pools and two
// LISTEN connections on one PostgreSQL database), so the waiting candidate
// hears of a release only the way another process would: the SQLite
// store's data_version poller, or PostgreSQL NOTIFY.
//
//	handoff  A holds a term, B campaigns and is told the lease is held; at a
//	         random moment 0–100 ms later A's term.Resign is called;
//	         ms/handoff is the time from that call to B's Campaign returning
//	         with a term.
//	crash    A takes the lease with Store.TryAcquire and never renews nor
//	         releases it (a process killed right after its last renewal);
//	         B campaigns; ms/failover is the time from A's acquire to B's
//	         Campaign returning. Expected: about TTL plus up to one jittered
//	         RetryInterval.
//
// Each b.Loop iteration runs a fixed number of rounds: 7 handoffs (about
// 0.1 s each) or 3 crashes (about 2 s each). At the default -benchtime=1s
// b.Loop stops after the iteration that passes 1 s: one iteration of crash,
// one or two of handoff; about 20 s for the four sub-benchmarks.
// -benchtime=Nx runs exactly N iterations, N times the rounds. The metrics are the median (ms/handoff,
// ms/failover) and the largest (max-ms/…) over every round of the run; ns/op
// is suppressed (it would be the sum of the rounds). The PostgreSQL cases
// are skipped unless LEADERAWARE_TEST_PG is set; they use a schema of their
// own, dropped at the end.
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
		benchFailover(b, open(), open())
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
		benchFailover(b, sa, sb)
	})
}

// watchStore is a Store that wakes waiting candidates on release, as both
// sqlitelease.Store and pglease.Store do.
type watchStore interface {
	elector.Store
	elector.ReleaseWatcher
}

func benchFailover(b *testing.B, sa, sb watchStore) {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	run := hex.EncodeToString(rnd[:])
	n := 0
	name := func(kind string) string {
		n++
		return fmt.Sprintf("failover/%s/%s/%d", run, kind, n)
	}

	b.Run("handoff", func(b *testing.B) {
		// Untimed: the first WatchRelease of sb starts its watcher (the
		// PostgreSQL listener connects in the background).
		handoffRound(b, sa, sb, name("warmup"))
		time.Sleep(100 * time.Millisecond)
		var samples []time.Duration
		for b.Loop() {
			for range handoffRounds {
				samples = append(samples, handoffRound(b, sa, sb, name("handoff")))
			}
		}
		reportSamples(b, samples, "handoff")
	})
	b.Run("crash", func(b *testing.B) {
		var samples []time.Duration
		for b.Loop() {
			for range crashRounds {
				samples = append(samples, crashRound(b, sa, sb, name("crash")))
			}
		}
		reportSamples(b, samples, "failover")
	})
}

// handoffRound returns the time from A's Resign to B's Campaign returning.
func handoffRound(b *testing.B, sa, sb watchStore, name string) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ta, err := failoverElector(b, sa, name, "a").Campaign(ctx)
	if err != nil {
		b.Fatal(err)
	}
	probe := &heldProbe{watchStore: sb, held: make(chan struct{}, 1)}
	eb := failoverElector(b, probe, name, "b")
	type result struct {
		term elector.Term
		err  error
		at   time.Time
	}
	won := make(chan result, 1)
	go func() {
		t, err := eb.Campaign(ctx)
		won <- result{t, err, time.Now()}
	}()
	var r result
	select {
	case <-probe.held: // B found the lease held and waits
	case r = <-won:
		b.Fatalf("B's Campaign returned while A leads: %v", r.err)
	}
	// A release comes at any moment of B's wait, not just after B's first
	// attempt: that would always meet the SQLite watcher at the same phase
	// of its 20 ms poll. B's next retry comes at least 250 ms after its
	// first, so the handoff still measures the wake-up, not the retry.
	time.Sleep(mrand.N(100 * time.Millisecond))
	start := time.Now()
	if err := ta.Resign(ctx); err != nil {
		b.Fatal(err)
	}
	r = <-won
	if r.err != nil {
		b.Fatal(r.err)
	}
	d := r.at.Sub(start)
	if r.term.Token() <= ta.Token() {
		b.Errorf("B's token %d is not above A's %d", r.term.Token(), ta.Token())
	}
	if err := r.term.Resign(ctx); err != nil {
		b.Fatal(err)
	}
	return d
}

// crashRound returns the time from the crashed leader's acquire to B's
// Campaign returning.
func crashRound(b *testing.B, sa, sb watchStore, name string) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	crashed, err := sa.TryAcquire(ctx, name, "crashed", failoverConfig.TTL)
	if err != nil {
		b.Fatal(err)
	}
	tb, err := failoverElector(b, sb, name, "b").Campaign(ctx)
	if err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	if tb.Token() <= crashed.Token {
		b.Errorf("B's token %d is not above the crashed leader's %d", tb.Token(), crashed.Token)
	}
	if err := tb.Resign(ctx); err != nil {
		b.Fatal(err)
	}
	return d
}

func failoverElector(b *testing.B, s elector.Store, name, holder string) *elector.LeaseElector {
	cfg := failoverConfig
	cfg.Holder = holder
	e, err := elector.New(s, name, cfg)
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// heldProbe signals when a TryAcquire finds the lease held. Embedding
// watchStore keeps WatchRelease visible to the elector.
type heldProbe struct {
	watchStore
	held chan struct{}
}

func (p *heldProbe) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration) (elector.Lease, error) {
	l, err := p.watchStore.TryAcquire(ctx, name, holder, ttl)
	if errors.Is(err, elector.ErrHeld) {
		select {
		case p.held <- struct{}{}:
		default:
		}
	}
	return l, err
}

// reportSamples reports the median and the largest sample in ms, and hides
// ns/op.
func reportSamples(b *testing.B, samples []time.Duration, what string) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(samples[len(samples)/2]), "ms/"+what)
	b.ReportMetric(ms(samples[len(samples)-1]), "max-ms/"+what)
}
