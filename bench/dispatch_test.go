package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/internal/layers"
)

// BenchmarkDispatch measures one Start and one Stop through n pass-through
// layers, built two ways:
//
//	chain        decorator.NewChain of n middleware, applied with Then
//	handwritten  n wrapper structs nested by hand, no Chain involved
//
// Both make the same interface call per layer, so Chain must add nothing
// per call: 0 allocs/op and chain within 1.5× of handwritten.
func BenchmarkDispatch(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{0, 1, 4, 16} {
		mws := make([]decorator.Middleware, n)
		for i := range mws {
			mws[i] = passThrough
		}
		chain := decorator.NewChain(mws...).Then(nopJob{})

		var hand decorator.Job = nopJob{}
		for range n {
			hand = &handWrapper{next: hand}
		}

		for _, c := range []struct {
			name string
			job  decorator.Job
		}{{"chain", chain}, {"handwritten", hand}} {
			b.Run(fmt.Sprintf("mw=%d/%s", n, c.name), func(b *testing.B) {
				if got := layers.Depth(c.job); got != n {
					b.Fatalf("Depth = %d, want %d", got, n)
				}
				j := c.job
				b.ReportAllocs()
				for b.Loop() {
					if err := j.Start(ctx); err != nil {
						b.Fatal(err)
					}
					if err := j.Stop(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

type nopJob struct{}

func (nopJob) Start(context.Context) error { return nil }
func (nopJob) Stop(context.Context) error  { return nil }

// passThrough is the middleware of the chain case.
func passThrough(next decorator.Job) decorator.Job { return &passJob{next: next} }

type passJob struct{ next decorator.Job }

func (p *passJob) Start(ctx context.Context) error { return p.next.Start(ctx) }
func (p *passJob) Stop(ctx context.Context) error  { return p.next.Stop(ctx) }
func (p *passJob) Unwrap() decorator.Job           { return p.next }

// handWrapper is what one writes without Chain: a struct around the next job.
type handWrapper struct{ next decorator.Job }

func (h *handWrapper) Start(ctx context.Context) error { return h.next.Start(ctx) }
func (h *handWrapper) Stop(ctx context.Context) error  { return h.next.Stop(ctx) }
func (h *handWrapper) Unwrap() decorator.Job           { return h.next }
