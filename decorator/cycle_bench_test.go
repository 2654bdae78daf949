package decorator_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

// BenchmarkGateCycle measures one Start → elected → Stop cycle of a
// decorated job whose elector hands out a ready term at once: the cost of
// the gate (its goroutine, the start and stop watchdogs, the hooks and
// contexts) without a store. after=N first runs N cycles untimed.
func BenchmarkGateCycle(b *testing.B) {
	ctx := context.Background()
	for _, after := range []int{10, 10000} {
		b.Run(fmt.Sprintf("after=%d", after), func(b *testing.B) {
			started := make(chan struct{}, 1)
			inner := &fakeJob{startFn: func(context.Context) error { started <- struct{}{}; return nil }}
			job := decorator.Decorate[decorator.Job](inner, stubElector{}, decorator.WithLogger(slog.New(slog.DiscardHandler)))
			cycle := func() {
				if err := job.Start(ctx); err != nil {
					b.Fatal(err)
				}
				<-started
				if err := job.Stop(ctx); err != nil {
					b.Fatal(err)
				}
			}
			for range after {
				cycle()
			}
			b.ReportAllocs()
			for b.Loop() {
				cycle()
			}
		})
	}
}

// stubElector wins a term at once, every time.
type stubElector struct{}

func (stubElector) Campaign(context.Context) (elector.Term, error) { return stubTerm{}, nil }

// stubTerm is a term that never ends on its own.
type stubTerm struct{}

func (stubTerm) Lease() elector.Lease {
	return elector.Lease{Name: leaseName, Holder: "a", Token: 1, Version: 1, TTL: time.Minute}
}
func (stubTerm) Token() uint64                 { return 1 }
func (stubTerm) Done() <-chan struct{}         { return nil }
func (stubTerm) TrustRemaining() time.Duration { return time.Minute }
func (stubTerm) Err() error                    { return nil }
func (stubTerm) Resign(context.Context) error  { return nil }
func (stubTerm) Abandon()                      {}

// BenchmarkStoreCycle measures one Start → elected → Stop cycle of a
// decorated job on a MemoryStore, with and without a follower of the
// lease's holder (an OnNewLeader hook; a logger at Info has one too).
func BenchmarkStoreCycle(b *testing.B) {
	ctx := context.Background()
	for _, watch := range []bool{false, true} {
		b.Run(fmt.Sprintf("watch=%v", watch), func(b *testing.B) {
			e, err := elector.New(elector.NewMemoryStore(), leaseName, elector.Config{Holder: "a"})
			if err != nil {
				b.Fatal(err)
			}
			var leaders atomic.Int64
			opts := []decorator.Option{decorator.WithLogger(slog.New(slog.DiscardHandler))}
			if watch {
				opts = append(opts, decorator.WithHooks(decorator.Hooks{OnNewLeader: func(elector.Lease) { leaders.Add(1) }}))
			}
			started := make(chan struct{}, 1)
			inner := &fakeJob{startFn: func(context.Context) error { started <- struct{}{}; return nil }}
			job := decorator.Decorate[decorator.Job](inner, e, opts...)
			for b.Loop() {
				if err := job.Start(ctx); err != nil {
					b.Fatal(err)
				}
				<-started
				if err := job.Stop(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(leaders.Load())/float64(b.N), "reports/op")
		})
	}
}
