package bench

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/layers"
)

// BenchmarkCycle measures one full cycle of a decorated job on a
// MemoryStore: Start, wait until the inner job has started (elected), Stop
// (inner Stop, resign, gate exit). after=N first runs N cycles untimed, so
// that after=10 and after=10000 side by side show the cost does not grow
// with the number of cycles a job has been through.
//
// Metrics: goroutines is the largest number of goroutines the running job
// added (the gate and the term's renewal: at most 2); left is the number it
// left behind after the last Stop (0).
func BenchmarkCycle(b *testing.B) {
	ctx := context.Background()
	for _, after := range []int{10, 10000} {
		b.Run(fmt.Sprintf("after=%d", after), func(b *testing.B) {
			e, err := elector.New(elector.NewMemoryStore(), "bench", elector.Config{Holder: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			inner := &signalJob{started: make(chan struct{}, 1)}
			job := decorator.Decorate[decorator.Job](inner, e, decorator.WithMiddleware(decorator.Recover()), quiet)
			cycle := func(running func()) {
				if err := job.Start(ctx); err != nil {
					b.Fatal(err)
				}
				<-inner.started
				running()
				if err := job.Stop(ctx); err != nil {
					b.Fatal(err)
				}
			}
			nop := func() {}
			for range after {
				cycle(nop)
			}
			// Untimed: count what a running job adds, once exited
			// goroutines of the previous cycle are gone.
			base := baseline()
			most := 0
			for range 100 {
				settle(base)
				cycle(func() { most = max(most, runtime.NumGoroutine()-base) })
			}
			depth := layers.Depth(job)
			b.ReportAllocs()
			for b.Loop() {
				cycle(nop)
			}
			b.ReportMetric(float64(most), "goroutines")
			b.ReportMetric(float64(settle(base)-base), "left")
			b.ReportMetric(float64(layers.Depth(job)), "depth")
			if got := layers.Depth(job); got != depth {
				b.Fatalf("Depth grew from %d to %d", depth, got)
			}
		})
	}
}

// baseline returns the fewest goroutines seen over 1ms.
func baseline() int {
	n := runtime.NumGoroutine()
	for range 10 {
		time.Sleep(100 * time.Microsecond)
		n = min(n, runtime.NumGoroutine())
	}
	return n
}

// settle waits up to 100ms for the number of goroutines to drop to base
// (a goroutine that returned may linger for a moment) and returns it.
func settle(base int) int {
	for range 1000 {
		if n := runtime.NumGoroutine(); n <= base {
			return n
		}
		time.Sleep(100 * time.Microsecond)
	}
	return runtime.NumGoroutine()
}

// signalJob reports each Start on a channel.
type signalJob struct{ started chan struct{} }

func (s *signalJob) Start(context.Context) error { s.started <- struct{}{}; return nil }
func (s *signalJob) Stop(context.Context) error  { return nil }

// quiet keeps the decorated jobs of the benchmarks from logging each
// election at Info: the benchmarks measure the library, not a log handler.
var quiet = decorator.WithLogger(slog.New(slog.DiscardHandler))
