package leaderprom_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	leaderprom "github.com/leaderaware/leaderaware/contrib/prometheus"
	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

// benchEvents is one of each event an elector and a decorated job report.
func benchEvents() []elector.Event {
	e := elector.Event{Lease: "price-refresh", Holder: holder, Token: 9, Result: elector.ResultOK, Duration: 3 * time.Millisecond}
	var events []elector.Event
	for _, k := range []elector.EventKind{elector.EventStoreOp, elector.EventCampaign, elector.EventElected, elector.EventDemoted,
		elector.EventFenced, elector.EventJobStart, elector.EventJobStop} {
		e.Kind, e.Op, e.Trust, e.Cause = k, 0, 0, 0
		switch k {
		case elector.EventStoreOp:
			e.Op, e.Trust = elector.OpRenew, 2700*time.Millisecond
		case elector.EventCampaign:
			e.Trust = 2700 * time.Millisecond
		case elector.EventDemoted:
			e.Cause = elector.CauseResigned
		}
		events = append(events, e)
	}
	return events
}

func BenchmarkObserve(b *testing.B) {
	for _, e := range benchEvents() {
		b.Run(e.Kind.String(), func(b *testing.B) {
			c := leaderprom.New()
			b.ReportAllocs()
			for b.Loop() {
				c.Observe(e)
			}
		})
	}
	b.Run("parallel", func(b *testing.B) {
		c := leaderprom.New()
		e := benchEvents()[0]
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.Observe(e)
			}
		})
	})
}

// BenchmarkCycleWithCollector measures a decorated job's Start/elected/Stop
// cycle on a MemoryStore side by side with no observer and with the
// Collector set on both the elector and the decorated job, as fxmodule wires
// it (goal: at most 5% more).
func BenchmarkCycleWithCollector(b *testing.B) {
	ctx := context.Background()
	for _, withCollector := range []bool{false, true} {
		name := "observer=none"
		if withCollector {
			name = "observer=collector"
		}
		b.Run(name, func(b *testing.B) {
			cfg := elector.Config{Holder: "bench"}
			opts := []decorator.Option{decorator.WithLogger(slog.New(slog.DiscardHandler))}
			if withCollector {
				c := leaderprom.New()
				prometheus.NewRegistry().MustRegister(c)
				cfg.Observer = c
				opts = append(opts, decorator.WithObserver(c))
			}
			e, err := elector.New(elector.NewMemoryStore(), "bench", cfg)
			if err != nil {
				b.Fatal(err)
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
			b.ReportAllocs()
			for b.Loop() {
				cycle()
			}
		})
	}
}

// startedJob reports each Start on a channel.
type startedJob struct{ started chan struct{} }

func (s *startedJob) Start(context.Context) error { s.started <- struct{}{}; return nil }
func (s *startedJob) Stop(context.Context) error  { return nil }
