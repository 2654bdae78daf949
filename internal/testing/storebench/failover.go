package storebench

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// failoverConfig are the elector timings of Failover.
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

// Failover measures, on the real clock, how long a lease takes to pass from
// an elector on sa to one on sb, two Store instances that stand in for two
// processes, with TTL 1.5s, RenewInterval 0.5s and RetryInterval 0.5s:
//
//	handoff  A holds a term, B campaigns and is told the lease is held; at a
//	         random moment 0–resignWithin later A's term.Resign is called;
//	         ms/handoff is the time from that call to B's Campaign returning
//	         with a term (7 rounds per iteration). resignWithin is at least
//	         the store's release poll period, so that the release meets its
//	         poller at any phase, and at most 250 ms, before B's own retry.
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
//	         from the crash to B's Campaign returning (3 rounds per
//	         iteration).
//
// A candidate that starts campaigning only after the crash (it never saw the
// holder renew) waits one TTL from its first read instead; this benchmark
// does not measure that case.
//
// The metrics are the median (ms/…) and the largest (max-ms/…) over every
// round of the run; ns/op is suppressed (it would be the sum of the rounds).
// The samples are logged, sorted.
func Failover(b *testing.B, sa, sb WatchStore, resignWithin time.Duration) {
	var run atomic.Int64
	name := func(kind string) string {
		return fmt.Sprintf("failover-%s-%d-%d", kind, time.Now().UnixNano(), run.Add(1))
	}
	b.Run("handoff", func(b *testing.B) {
		// Untimed: the first WatchRelease of sb starts its watcher (some
		// connect in the background).
		handoffRound(b, sa, sb, name("warmup"), resignWithin)
		time.Sleep(100 * time.Millisecond)
		var samples []time.Duration
		for b.Loop() {
			for range handoffRounds {
				samples = append(samples, handoffRound(b, sa, sb, name("handoff"), resignWithin))
			}
		}
		reportMs(b, samples, "handoff")
	})
	b.Run("crash", func(b *testing.B) {
		var fromWrite, fromCrash []time.Duration
		for b.Loop() {
			for range crashRounds {
				w, c := crashRound(b, sa, sb, name("crash"))
				fromWrite, fromCrash = append(fromWrite, w), append(fromCrash, c)
			}
		}
		reportMs(b, fromWrite, "failover")
		reportMs(b, fromCrash, "after-crash")
	})
}

type campaignResult struct {
	term elector.Term
	err  error
	at   time.Time
}

// campaignB starts B's campaign on s and waits until it found the lease
// held.
func campaignB(ctx context.Context, b *testing.B, s WatchStore, name string) <-chan campaignResult {
	probe := &heldProbe{WatchStore: s, held: make(chan struct{}, 1)}
	won := make(chan campaignResult, 1)
	e := failoverElector(b, probe.store(), name, "b")
	go func() {
		t, err := e.Campaign(ctx)
		won <- campaignResult{t, err, time.Now()}
	}()
	select {
	case <-probe.held:
	case r := <-won:
		b.Fatalf("B's Campaign returned while A leads: %v", r.err)
	}
	return won
}

// handoffRound returns the time from A's Resign to B's Campaign returning.
func handoffRound(b *testing.B, sa, sb WatchStore, name string, resignWithin time.Duration) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ta, err := failoverElector(b, sa, name, "a").Campaign(ctx)
	if err != nil {
		b.Fatal(err)
	}
	won := campaignB(ctx, b, sb, name)
	// A release comes at any moment of B's wait, not just after B's first
	// attempt: that would always meet a store's release poller at the same
	// phase.
	time.Sleep(mrand.N(resignWithin))
	start := time.Now()
	if err := ta.Resign(ctx); err != nil {
		b.Fatal(err)
	}
	return tookOver(ctx, b, ta, won).Sub(start)
}

// crashRound returns the times from the start of the crashed leader's last
// successful write, and from its crash, to B's Campaign returning.
func crashRound(b *testing.B, sa, sb WatchStore, name string) (fromWrite, fromCrash time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ca := &crashable{WatchStore: sa}
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
	won := campaignB(ctx, b, sb, name)
	// Crash at any phase of A's renewals, after B has seen at least one.
	ri := failoverConfig.RenewInterval
	select {
	case <-time.After(ri + mrand.N(ri)):
	case r := <-won:
		b.Fatalf("B's Campaign returned while A leads: %v", r.err)
	}
	lastWrite, crashed := ca.crash()
	ta.Abandon()
	at := tookOver(ctx, b, ta, won)
	return at.Sub(lastWrite), at.Sub(crashed)
}

// tookOver waits for B's campaign to return a term, checks that its token
// is above that of A's term ta, resigns it, and returns when it returned.
func tookOver(ctx context.Context, b *testing.B, ta elector.Term, won <-chan campaignResult) time.Time {
	r := <-won
	if r.err != nil {
		b.Fatal(r.err)
	}
	if r.term.Token() <= ta.Token() {
		b.Errorf("B's token %d is not above A's %d", r.term.Token(), ta.Token())
	}
	if err := r.term.Resign(ctx); err != nil {
		b.Fatal(err)
	}
	return r.at
}

var errCrashed = errors.New("crashed: the store is unreachable")

// crashable is a store that fails every call from its crash on, as seen
// from a process that was killed. It remembers when its last successful
// TryAcquire or Renew started.
type crashable struct {
	WatchStore

	mu        sync.Mutex // held during each TryAcquire and Renew
	crashed   bool
	lastWrite time.Time
}

func (c *crashable) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	return c.write(func() (elector.Lease, error) { return c.WatchStore.TryAcquire(ctx, name, holder, ttl, observed) })
}

func (c *crashable) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	return c.write(func() (elector.Lease, error) { return c.WatchStore.Renew(ctx, l, ttl) })
}

func (c *crashable) Release(ctx context.Context, l elector.Lease) error {
	c.mu.Lock()
	crashed := c.crashed
	c.mu.Unlock()
	if crashed {
		return errCrashed
	}
	return c.WatchStore.Release(ctx, l)
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

// heldProbe signals when a TryAcquire finds the lease held.
type heldProbe struct {
	WatchStore
	held chan struct{}
}

// store returns p as the elector should see it: with the inner store's
// optional interfaces.
func (p *heldProbe) store() elector.Store { return withWatch(p, p.WatchStore) }

func (p *heldProbe) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	l, err := p.WatchStore.TryAcquire(ctx, name, holder, ttl, observed)
	if errors.Is(err, elector.ErrHeld) {
		select {
		case p.held <- struct{}{}:
		default:
		}
	}
	return l, err
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

// reportMs reports the median and the largest sample in ms, hides ns/op
// (the sum of the rounds), and logs the samples, sorted.
func reportMs(b *testing.B, samples []time.Duration, what string) {
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
