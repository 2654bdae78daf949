package fxmodule_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/fxmodule"
)

// recorder is an elector.Observer that records every event.
type recorder struct {
	mu     sync.Mutex
	events []elector.Event
}

func (r *recorder) Observe(ev elector.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

// kinds returns the kinds of the events of lease, each once, in order.
func (r *recorder) kinds(lease string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var kinds []string
	for _, ev := range r.events {
		if ev.Lease == lease && !slices.Contains(kinds, ev.Kind.String()) {
			kinds = append(kinds, ev.Kind.String())
		}
	}
	slices.Sort(kinds)
	return kinds
}

// leases returns the lease names of the events, each once, sorted.
func (r *recorder) leases() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var leases []string
	for _, ev := range r.events {
		if !slices.Contains(leases, ev.Lease) {
			leases = append(leases, ev.Lease)
		}
	}
	slices.Sort(leases)
	return leases
}

// The kinds of events a job that led one term and stopped reports: from
// its elector (campaign, store operations) and from its decorated job.
var (
	electorKinds   = []string{"campaign", "store_operation"}
	decoratorKinds = []string{"demoted", "elected", "job_start", "job_stop"}
	allKinds       = []string{"campaign", "demoted", "elected", "job_start", "job_stop", "store_operation"}
)

// runTwoJobs runs an app with the jobs "alpha" (a concrete J, with
// alphaOpts) and "beta" (an interface J, with betaOpts) on a memory store
// until both have led, then stops it.
func runTwoJobs(t *testing.T, cfg elector.Config, alphaOpts, betaOpts []decorator.Option, extra ...fx.Option) {
	t.Helper()
	alpha, beta := newCountingJob(nil), newCountingJob(nil)
	app := fxtestNew(t, append([]fx.Option{
		fxmodule.Module(fxmodule.Config{Elector: cfg}),
		fxmodule.WithStore(elector.NewMemoryStore()),
		fx.Provide(func() *countingJob { return alpha }, func() testJob { return beta }),
		fxmodule.LeaderJob[*countingJob]("alpha", alphaOpts...),
		fxmodule.LeaderJob[testJob]("beta", betaOpts...),
	}, extra...)...)
	app.RequireStart()
	require.Eventually(t, func() bool { return alpha.running.Load() && beta.running.Load() }, 5*time.Second, 5*time.Millisecond)
	app.RequireStop()
}

// observe returns the option that provides o as the graph's
// elector.Observer.
func observe(o elector.Observer) fx.Option {
	return fx.Provide(func() elector.Observer { return o })
}

// TestObserverFromGraph: an elector.Observer in the graph receives the
// events of every LeaderJob, from its elector and its decorated job.
func TestObserverFromGraph(t *testing.T) {
	rec := new(recorder)
	runTwoJobs(t, fast, nil, nil, observe(rec))
	assert.Equal(t, []string{"alpha", "beta"}, rec.leases())
	assert.Equal(t, allKinds, rec.kinds("alpha"))
	assert.Equal(t, allKinds, rec.kinds("beta"))
}

// TestObserverWithoutGraph: without an observer in the graph, the jobs run
// as before, and an observer set in Module's Config.Elector observes every
// job, elector and decorated job.
func TestObserverWithoutGraph(t *testing.T) {
	runTwoJobs(t, fast, nil, nil)

	rec := new(recorder)
	cfg := fast
	cfg.Observer = rec
	runTwoJobs(t, cfg, nil, nil)
	assert.Equal(t, allKinds, rec.kinds("alpha"))
	assert.Equal(t, allKinds, rec.kinds("beta"))
}

// TestObserverPrecedence: Module's Config.Elector.Observer wins over the
// graph's; a job's WithElector observer wins over both, for its elector and
// its decorated job; a job's decorator.WithObserver wins for its decorated
// job only.
func TestObserverPrecedence(t *testing.T) {
	t.Run("Config.Elector.Observer", func(t *testing.T) {
		graph, module := new(recorder), new(recorder)
		cfg := fast
		cfg.Observer = module
		runTwoJobs(t, cfg, nil, nil, observe(graph))
		assert.Empty(t, graph.leases())
		assert.Equal(t, []string{"alpha", "beta"}, module.leases())
	})
	t.Run("WithElector", func(t *testing.T) {
		graph, own := new(recorder), new(recorder)
		runTwoJobs(t, fast, nil, []decorator.Option{fxmodule.WithElector(elector.Config{Observer: own})}, observe(graph))
		assert.Equal(t, []string{"alpha"}, graph.leases())
		assert.Equal(t, []string{"beta"}, own.leases())
		assert.Equal(t, allKinds, own.kinds("beta"))
	})
	t.Run("decorator.WithObserver", func(t *testing.T) {
		graph, own := new(recorder), new(recorder)
		runTwoJobs(t, fast, nil, []decorator.Option{decorator.WithObserver(own)}, observe(graph))
		assert.Equal(t, allKinds, graph.kinds("alpha"))
		assert.Equal(t, electorKinds, graph.kinds("beta"))
		assert.Equal(t, []string{"beta"}, own.leases())
		assert.Equal(t, decoratorKinds, own.kinds("beta"))
	})
}

// TestNewLeaderJobObserver: without fx, the elector's observer observes the
// decorated job too.
func TestNewLeaderJobObserver(t *testing.T) {
	rec := new(recorder)
	cfg := fast
	cfg.Observer = rec
	inner := newCountingJob(nil)
	job, err := fxmodule.NewLeaderJob[decorator.Job](inner, elector.NewMemoryStore(), "plain", cfg)
	require.NoError(t, err)
	require.NoError(t, job.Start(t.Context()))
	require.Eventually(t, inner.running.Load, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, job.Stop(t.Context()))
	assert.Equal(t, allKinds, rec.kinds("plain"))
}
