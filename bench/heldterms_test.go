//go:build unix

package bench

import (
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// BenchmarkHeldTerms measures what 1,000 terms held by one process cost
// while they wait between renewals on the memory store: the process CPU time
// (getrusage, so the Go runtime and GC included) over a 2 s window per op,
// in percent of one core. Goal: the terms' timers, with the Store's resume
// watch, well under 1%.
//
//	idle     TTL 24 h, RenewInterval 8 h: no renewal falls in the window,
//	         so what remains is the idle terms and the resume watch.
//	default  the default timings (TTL 15 s, RenewInterval 5 s): 200
//	         renewals/s on top.
func BenchmarkHeldTerms(b *testing.B) {
	b.Run("idle", func(b *testing.B) {
		benchHeldTerms(b, elector.Config{TTL: 24 * time.Hour, RenewInterval: 8 * time.Hour})
	})
	b.Run("default", func(b *testing.B) { benchHeldTerms(b, elector.Config{}) })
}

func benchHeldTerms(b *testing.B, cfg elector.Config) {
	cfg.Holder = "held"
	holdTerms(b, elector.NewMemoryStore(), "held", cfg)
	const window = 2 * time.Second
	var cpu time.Duration
	for b.Loop() {
		c0 := processCPU(b)
		time.Sleep(window)
		cpu += processCPU(b) - c0
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(cpu)/float64(window*time.Duration(b.N))*100, "%core")
}
