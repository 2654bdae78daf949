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
	"strings"
	"sync"
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
//	         random moment 0–100 ms later A's term.Resign is called;
//	         ms/handoff is the time from that call to B's Campaign returning
//	         with a term.
//	crash    A holds a term and renews it; 0–0.5 s later (random, so that
//	         B's reads meet A's renewals at any phase) B campaigns, finds
//	         the lease held and watches it. 0.5–1 s after that (random) A
//	         crashes: its store refuses every call from then on (a renewal
//	         in flight finishes first), and its term is abandoned, so the
//	         lease is neither renewed nor released again. ms/failover is the
//	         time from the start of A's last successful write (its last
//	         renewal, or its acquire) to B's Campaign returning: an upper
//	         bound of the time from the last renewal, which the write
//	         committed in. Goal: at most TTL + RetryInterval (2,000 ms): B
//	         takes over after seeing A's last version unchanged for the TTL,
//	         and it sees that version at its first read after the renewal,
//	         at most one RetryInterval later. ms/after-crash is the time
//	         from the crash to B's Campaign returning. The samples are
//	         logged, sorted.
//
// A candidate that starts campaigning only after the crash (it never saw the
// holder renew) waits one TTL from its first read instead; this benchmark
// does not measure that case.
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
		var fromRenewal, fromCrash []time.Duration
		for b.Loop() {
			for range crashRounds {
				r, c := crashRound(b, sa, sb, name("crash"))
				fromRenewal, fromCrash = append(fromRenewal, r), append(fromCrash, c)
			}
		}
		reportSamples(b, fromRenewal, "failover")
		reportMedian(b, fromCrash, "after-crash")
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
	probe := newHeldProbe(sb)
	eb := failoverElector(b, probe.store(), name, "b")
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

// crashRound returns the times from the start of the crashed leader's last
// successful write, and from its crash, to B's Campaign returning.
func crashRound(b *testing.B, sa, sb watchStore, name string) (fromRenewal, fromCrash time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ca := &crashable{watchStore: sa}
	ta, err := failoverElector(b, ca, name, "a").Campaign(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer ta.Abandon()
	// B starts at a random phase of A's renewals, as a replica started at
	// any moment would: B's reads (and a store's lease watcher, which
	// reads every RetryInterval) keep that phase, which sets how soon B
	// sees A's last renewal.
	time.Sleep(mrand.N(failoverConfig.RetryInterval))
	probe := newHeldProbe(sb)
	eb := failoverElector(b, probe.store(), name, "b")
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
	case <-probe.held: // B found the lease held and watches it
	case r = <-won:
		b.Fatalf("B's Campaign returned while A leads: %v", r.err)
	}
	// Crash at any phase of A's renewals, after B has seen at least one.
	ri := failoverConfig.RenewInterval
	select {
	case <-time.After(ri + mrand.N(ri)):
	case r = <-won:
		b.Fatalf("B's Campaign returned while A leads: %v", r.err)
	}
	lastWrite, crashedAt := ca.crash()
	ta.Abandon()
	r = <-won
	if r.err != nil {
		b.Fatal(r.err)
	}
	if r.term.Token() <= ta.Token() {
		b.Errorf("B's token %d is not above A's %d", r.term.Token(), ta.Token())
	}
	if err := r.term.Resign(ctx); err != nil {
		b.Fatal(err)
	}
	return r.at.Sub(lastWrite), r.at.Sub(crashedAt)
}

var errCrashed = errors.New("crashed: the store is unreachable")

// crashable is a store that stops working at crash, as seen from a process
// that was killed. It remembers when its last successful TryAcquire or
// Renew started.
type crashable struct {
	watchStore

	mu        sync.Mutex // held during each TryAcquire and Renew
	crashed   bool
	lastWrite time.Time
}

func (c *crashable) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	return c.write(func() (elector.Lease, error) { return c.watchStore.TryAcquire(ctx, name, holder, ttl, observed) })
}

func (c *crashable) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	return c.write(func() (elector.Lease, error) { return c.watchStore.Renew(ctx, l, ttl) })
}

func (c *crashable) Release(ctx context.Context, l elector.Lease) error {
	c.mu.Lock()
	crashed := c.crashed
	c.mu.Unlock()
	if crashed {
		return errCrashed
	}
	return c.watchStore.Release(ctx, l)
}

func (c *crashable) write(op func() (elector.Lease, error)) (elector.Lease, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return elector.Lease{}, errCrashed
	}
	start := time.Now()
	l, err := op()
	if err == nil {
		c.lastWrite = start
	}
	return l, err
}

// crash makes every later call fail, once the write in flight (if any) has
// returned, and returns the start of the last successful write and the
// moment of the crash.
func (c *crashable) crash() (lastWrite, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.crashed = true
	return c.lastWrite, time.Now()
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
// watchStore keeps WatchRelease visible to the elector; store also passes
// on the inner store's LeaseWatcher, if it has one, which the elector then
// uses instead.
type heldProbe struct {
	watchStore
	held chan struct{}
}

func newHeldProbe(s watchStore) *heldProbe {
	return &heldProbe{watchStore: s, held: make(chan struct{}, 1)}
}

// store returns p as the elector should see it: with the inner store's
// optional interfaces.
func (p *heldProbe) store() elector.Store {
	if lw, ok := p.watchStore.(elector.LeaseWatcher); ok {
		return struct {
			*heldProbe
			elector.LeaseWatcher
		}{p, lw}
	}
	return p
}

func (p *heldProbe) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	l, err := p.watchStore.TryAcquire(ctx, name, holder, ttl, observed)
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
	all := make([]string, len(samples))
	for i, d := range samples {
		all[i] = fmt.Sprintf("%.1f", ms(d))
	}
	b.Logf("ms/%s, %d rounds, sorted: %s", what, len(samples), strings.Join(all, " "))
}

// reportMedian reports the median sample in ms.
func reportMedian(b *testing.B, samples []time.Duration, what string) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2])/float64(time.Millisecond), "ms/"+what)
}
