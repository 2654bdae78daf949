package bench

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

// BenchmarkCycleObserver measures the cycle of BenchmarkCycle (Start,
// elected, Stop on a MemoryStore) side by side:
//
//	none         no observer: the observer support must cost no allocation
//	job          a counting observer on the decorated job (elected, job
//	             start, job stop, demoted: 4 events per cycle)
//	job+elector  the same observer on the elector too, as the docs advise
//	             (adds its acquire, campaign and release events)
//
// Metric: events/op, the events the observer received per cycle.
func BenchmarkCycleObserver(b *testing.B) {
	ctx := context.Background()
	for _, bc := range []struct {
		name             string
		job, withElector bool
	}{{"none", false, false}, {"job", true, false}, {"job+elector", true, true}} {
		b.Run(bc.name, func(b *testing.B) {
			obs := &countingObserver{}
			cfg := elector.Config{Holder: "bench"}
			if bc.withElector {
				cfg.Observer = obs
			}
			e, err := elector.New(elector.NewMemoryStore(), "bench", cfg)
			if err != nil {
				b.Fatal(err)
			}
			opts := []decorator.Option{decorator.WithMiddleware(decorator.Recover()), quiet}
			if bc.job {
				opts = append(opts, decorator.WithObserver(obs))
			}
			inner := &startedJob{started: make(chan struct{}, 1)}
			job := decorator.Decorate[decorator.Job](inner, e, opts...)
			cycle := func() {
				if err := job.Start(ctx); err != nil {
					b.Fatal(err)
				}
				<-inner.started
				if err := job.Stop(ctx); err != nil {
					b.Fatal(err)
				}
			}
			for range 10 {
				cycle()
			}
			before := obs.n.Load()
			b.ReportAllocs()
			for b.Loop() {
				cycle()
			}
			b.ReportMetric(float64(obs.n.Load()-before)/float64(b.N), "events/op")
		})
	}
}

// countingObserver counts the events it receives, the least an Observer
// can do.
type countingObserver struct{ n atomic.Int64 }

func (c *countingObserver) Observe(elector.Event) { c.n.Add(1) }

// startedJob reports each Start on a channel.
type startedJob struct{ started chan struct{} }

func (s *startedJob) Start(context.Context) error { s.started <- struct{}{}; return nil }
func (s *startedJob) Stop(context.Context) error  { return nil }
