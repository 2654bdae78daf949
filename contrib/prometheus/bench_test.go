package leaderprom_test

import (
	"testing"
	"time"

	leaderprom "github.com/leaderaware/leaderaware/contrib/prometheus"
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
