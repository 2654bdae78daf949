package mysqllease

// This file is the same in etcdlease and mysqllease.

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// watchStore is a Store that wakes waiting candidates on release.
type watchStore interface {
	elector.Store
	elector.ReleaseWatcher
}

// benchTimings are the elector timings of benchFailover.
var benchTimings = elector.Config{TTL: 1500 * time.Millisecond, RenewInterval: 500 * time.Millisecond, RetryInterval: 500 * time.Millisecond}

// benchFailover measures on the real clock how long a lease takes to pass
// from an elector on sa to one on sb:
//
//	handoff  A holds a term; B campaigns and finds it held; 0–250 ms later
//	         A resigns. ms/handoff: from A's Resign call to B's Campaign
//	         returning with a term (10 rounds per iteration). The release
//	         comes at any moment of B's wait, so that it meets a store's
//	         release poller at any phase (the rounds would otherwise keep
//	         in step with it); B's own retry, 250–500 ms after it found the
//	         lease held, may come first.
//	crash    A holds and renews a term; B campaigns and watches it. 0.5–1 s
//	         later A crashes: its store fails every call from then on, and
//	         its term is abandoned. ms/failover: from the start of A's last
//	         successful write to B's Campaign returning; goal at most TTL +
//	         RetryInterval = 2,000 ms. ms/after-crash: from the crash
//	         (3 rounds per iteration).
//
// Each reports the median and, as max-ms/..., the largest sample.
func benchFailover(b *testing.B, sa, sb watchStore) {
	var run atomic.Int64
	name := func(kind string) string {
		return fmt.Sprintf("failover-%s-%d-%d", kind, time.Now().UnixNano(), run.Add(1))
	}
	b.Run("handoff", func(b *testing.B) {
		handoffRound(b, sa, sb, name("warmup")) // starts sb's release watch
		var samples []time.Duration
		for b.Loop() {
			for range 10 {
				samples = append(samples, handoffRound(b, sa, sb, name("handoff")))
			}
		}
		reportMs(b, samples, "handoff")
	})
	b.Run("crash", func(b *testing.B) {
		var fromWrite, fromCrash []time.Duration
		for b.Loop() {
			for range 3 {
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
func campaignB(ctx context.Context, b *testing.B, s watchStore, name string) <-chan campaignResult {
	probe := &heldProbe{watchStore: s, held: make(chan struct{}, 1)}
	won := make(chan campaignResult, 1)
	e := benchElector(b, probe, name, "b")
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
func handoffRound(b *testing.B, sa, sb watchStore, name string) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ta, err := benchElector(b, sa, name, "a").Campaign(ctx)
	if err != nil {
		b.Fatal(err)
	}
	won := campaignB(ctx, b, sb, name)
	time.Sleep(mrand.N(250 * time.Millisecond))
	start := time.Now()
	if err := ta.Resign(ctx); err != nil {
		b.Fatal(err)
	}
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
	return r.at.Sub(start)
}

// crashRound returns the times from the start of the crashed leader's last
// successful write, and from its crash, to B's Campaign returning.
func crashRound(b *testing.B, sa, sb watchStore, name string) (fromWrite, fromCrash time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ca := &crashable{watchStore: sa}
	ta, err := benchElector(b, ca, name, "a").Campaign(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer ta.Abandon()
	won := campaignB(ctx, b, sb, name)
	ri := benchTimings.RenewInterval
	select {
	case <-time.After(ri + mrand.N(ri)): // crash at any phase of A's renewals
	case r := <-won:
		b.Fatalf("B's Campaign returned while A leads: %v", r.err)
	}
	lastWrite, crashed := ca.crash()
	ta.Abandon()
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
	return r.at.Sub(lastWrite), r.at.Sub(crashed)
}

var errCrashed = errors.New("crashed")

// crashable is a store that fails every call from its crash on, as seen
// from a process that was killed. It remembers when its last successful
// TryAcquire or Renew started.
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

// crash makes every later call fail, once the write in flight has
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
	watchStore
	held chan struct{}
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

func benchElector(b *testing.B, s elector.Store, name, holder string) *elector.LeaseElector {
	cfg := benchTimings
	cfg.Holder = holder
	e, err := elector.New(s, name, cfg)
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// reportMs reports the median and the largest sample in ms, and hides
// ns/op (the sum of the rounds).
func reportMs(b *testing.B, samples []time.Duration, what string) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(samples[len(samples)/2]), "ms/"+what)
	b.ReportMetric(ms(samples[len(samples)-1]), "max-ms/"+what)
}
