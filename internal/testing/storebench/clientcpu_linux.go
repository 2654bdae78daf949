//go:build linux

package storebench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// The timings of ClientCPU.
const (
	cpuLeases = 1000
	cpuWarmup = 5 * time.Second  // every follower has found its lease held, and the first renewals are past
	cpuWindow = 10 * time.Second // two renewals of every lease, five reads by every follower
)

// ClientCPU measures the client side of 1,000 leases at the default
// timings (TTL 15s, RenewInterval 5s, RetryInterval 2s), all in this
// process: one elector per lease on the leader store holds a term and
// renews it, and one per lease on the follower store campaigns for it (and
// so watches it). After a warm-up, over 10 s, it reports %core, this
// process's user and system CPU time as a percentage of one core; renews/s
// and acquires/s, the store calls the terms and the campaigns made; and,
// if serverCPU is not nil, server-%core, the CPU time it reports as a
// percentage of one core.
func ClientCPU(b *testing.B, leader, follower WatchStore, serverCPU func() time.Duration) {
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		lc, fc := &opCounter{WatchStore: leader}, &opCounter{WatchStore: follower}
		run := time.Now().UnixNano()
		terms := make([]elector.Term, cpuLeases)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for i := range terms {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				e, err := elector.New(lc.store(), fmt.Sprintf("cpu-%d-%d", run, i), elector.Config{Holder: "leader"})
				if err == nil {
					terms[i], err = e.Campaign(ctx)
				}
				if err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		if b.Failed() {
			cancel()
			return
		}
		var tookOver atomic.Int64
		for i := range terms {
			e, err := elector.New(fc.store(), fmt.Sprintf("cpu-%d-%d", run, i), elector.Config{Holder: "follower"})
			if err != nil {
				b.Fatal(err)
			}
			wg.Go(func() {
				if t, err := e.Campaign(ctx); err == nil {
					tookOver.Add(1)
					t.Abandon()
				}
			})
		}
		time.Sleep(cpuWarmup)
		lc.reset()
		fc.reset()
		var s0, s1 time.Duration
		if serverCPU != nil {
			s0 = serverCPU()
		}
		c0, w0 := processCPU(b), time.Now()
		time.Sleep(cpuWindow)
		c1, wall := processCPU(b), time.Since(w0)
		if serverCPU != nil {
			s1 = serverCPU()
		}
		renews, acquires := lc.renews.Load(), fc.acquires.Load()
		cancel()
		wg.Wait()
		for _, t := range terms {
			if t.Err() != nil {
				b.Errorf("a leader's term ended: %v", t.Err())
			}
			t.Abandon()
		}
		if n := tookOver.Load(); n > 0 {
			b.Errorf("%d followers took over leases their leader renewed", n)
		}
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(float64(c1-c0)/float64(wall)*100, "%core")
		b.ReportMetric(float64(renews)/wall.Seconds(), "renews/s")
		b.ReportMetric(float64(acquires)/wall.Seconds(), "acquires/s")
		if serverCPU != nil {
			b.ReportMetric(float64(s1-s0)/float64(wall)*100, "server-%core")
		}
	}
}

// processCPU returns the user and system CPU time of this process so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// opCounter counts the renewals and acquires made through a store; give
// it to electors as store returns it.
type opCounter struct {
	WatchStore
	renews, acquires atomic.Int64
}

func (c *opCounter) reset() { c.renews.Store(0); c.acquires.Store(0) }

// store returns c as the elector should see it: with the inner store's
// optional interfaces, its batched renewals counted too.
func (c *opCounter) store() elector.Store {
	w := withWatch(c, c.WatchStore)
	if b, ok := c.WatchStore.(elector.BatchRenewer); ok {
		return struct {
			watching
			elector.BatchRenewer
		}{w, batchCounter{c, b}}
	}
	return w
}

func (c *opCounter) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	c.acquires.Add(1)
	return c.WatchStore.TryAcquire(ctx, name, holder, ttl, observed)
}

func (c *opCounter) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	c.renews.Add(1)
	return c.WatchStore.Renew(ctx, l, ttl)
}

// batchCounter counts the terms of each RenewMany as renewals.
type batchCounter struct {
	c *opCounter
	b elector.BatchRenewer
}

func (b batchCounter) RenewMany(ctx context.Context, terms []elector.Lease) ([]elector.Lease, error) {
	b.c.renews.Add(int64(len(terms)))
	return b.b.RenewMany(ctx, terms)
}
