package fxmodule_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/fxmodule"
)

// registryApp returns an app on store with the holder and extra options,
// and puts its Registry in *reg.
func registryApp(t *testing.T, store elector.Store, holder string, reg **fxmodule.Registry, extra ...fx.Option) *fxtest.App {
	t.Helper()
	cfg := fast
	cfg.Holder = holder
	return fxtestNew(t, append([]fx.Option{
		fxmodule.Module(fxmodule.Config{Elector: cfg}),
		fxmodule.WithStore(store),
		fx.Populate(reg),
	}, extra...)...)
}

// leading returns the lease names of the jobs reg leads, in order.
func leading(reg *fxmodule.Registry) []string {
	var names []string
	for _, s := range reg.Jobs() {
		if s.Leading {
			names = append(names, s.Lease)
		}
	}
	return names
}

// TestRegistry: app A has two jobs, "alpha" (a concrete J) and "beta" (an
// interface J); app B, started first, has "beta" only, so A leads alpha
// and B leads beta. A's Registry lists both jobs in lease order, says
// which it leads, who leads each lease (through the store), that it is
// healthy and ready though it follows beta, and gives the store. When B
// stops, A takes beta over.
func TestRegistry(t *testing.T) {
	ctx := context.Background()
	store := elector.NewMemoryStore()
	alphaA, betaA, betaB := newCountingJob(nil), newCountingJob(nil), newCountingJob(nil)
	var regA, regB *fxmodule.Registry
	appB := registryApp(t, store, "app-b", &regB,
		fx.Provide(func() testJob { return betaB }),
		fxmodule.LeaderJob[testJob]("beta"),
	)
	appA := registryApp(t, store, "app-a", &regA,
		fx.Provide(func() testJob { return betaA }, func() *countingJob { return alphaA }),
		fxmodule.LeaderJob[testJob]("beta"),
		fxmodule.LeaderJob[*countingJob]("alpha"),
	)
	req := httptest.NewRequest("GET", "/readyz", nil)

	// Before the apps start: listed, leading nothing, healthy, not ready.
	require.Len(t, regA.Jobs(), 2)
	assert.Empty(t, leading(regA))
	assert.NoError(t, regA.Healthy(req))
	assert.ErrorContains(t, regA.Ready(req), "has not started")
	assert.Same(t, store, regA.Store())
	// Job gives the decorated job of a lease, which leads to the inner job.
	var inner decorator.Job = regA.Job("alpha")
	_, decorated := decorator.StatusOf(inner)
	assert.True(t, decorated, "%T", inner)
	for u, ok := inner.(interface{ Unwrap() decorator.Job }); ok; u, ok = inner.(interface{ Unwrap() decorator.Job }) {
		inner = u.Unwrap()
	}
	assert.Same(t, alphaA, inner)
	assert.Nil(t, regA.Job("nobody"))

	appB.RequireStart()
	require.Eventually(t, func() bool { return len(leading(regB)) == 1 }, 5*time.Second, 5*time.Millisecond, "B should lead beta")
	appA.RequireStart()
	require.Eventually(t, func() bool { return len(leading(regA)) == 1 }, 5*time.Second, 5*time.Millisecond, "A should lead alpha")
	assert.Never(t, func() bool { return betaA.running.Load() }, 2*fast.RenewInterval, 10*time.Millisecond, "A must not run beta while B leads it")

	jobs := regA.Jobs()
	require.Len(t, jobs, 2)
	alpha, beta := jobs[0], jobs[1]
	assert.Equal(t, "alpha", alpha.Lease)
	assert.Equal(t, "*fxmodule_test.countingJob", alpha.Job)
	assert.True(t, alpha.Leading)
	assert.Equal(t, "app-a", alpha.Holder)
	assert.NotZero(t, alpha.Token)
	assert.True(t, alpha.TrustKnown)
	assert.Equal(t, "beta", beta.Lease)
	assert.False(t, beta.Leading)
	assert.Zero(t, beta.Token, "A holds no term of beta")

	l, err := regA.Leader(ctx, "alpha")
	require.NoError(t, err)
	assert.Equal(t, "app-a", l.Holder)
	assert.Equal(t, alpha.Token, l.Token)
	l, err = regA.Leader(ctx, "beta")
	require.NoError(t, err)
	assert.Equal(t, "app-b", l.Holder, "B leads beta")
	assert.Equal(t, regB.Jobs()[0].Token, l.Token)
	_, err = regA.Leader(ctx, "nobody")
	assert.ErrorIs(t, err, elector.ErrNoLease, "a lease no one took is free")

	for name, reg := range map[string]*fxmodule.Registry{"A": regA, "B": regB} {
		assert.NoErrorf(t, reg.Healthy(req), "app %s: leaders and followers are healthy", name)
		assert.NoErrorf(t, reg.Ready(req), "app %s: readiness does not depend on leadership", name)
	}

	// B stops: beta is released and A takes it over.
	appB.RequireStop()
	assert.ErrorContains(t, regB.Ready(req), "stopping")
	require.Eventually(t, func() bool { return len(leading(regA)) == 2 }, handoffBound, 5*time.Millisecond, "A should take beta over")
	l, err = regA.Leader(ctx, "beta")
	require.NoError(t, err)
	assert.Equal(t, "app-a", l.Holder)

	appA.RequireStop()
	assert.Empty(t, leading(regA))
	assert.ErrorContains(t, regA.Ready(req), "stopping")
	_, err = regA.Leader(ctx, "alpha")
	assert.ErrorIs(t, err, elector.ErrNoLease, "stopping released the lease")
}

// blockingJob is an inner job whose Start blocks until release is closed,
// ignoring its context.
type blockingJob struct {
	release chan struct{}
	once    sync.Once
}

func newBlockingJob() *blockingJob { return &blockingJob{release: make(chan struct{})} }

func (j *blockingJob) Start(context.Context) error { <-j.release; return nil }
func (j *blockingJob) Stop(context.Context) error  { return nil }
func (j *blockingJob) unblock()                    { j.once.Do(func() { close(j.release) }) }

// otherBlockingJob is a second job type that blocks.
type otherBlockingJob struct{ *blockingJob }

// TestRegistryHealthy: while the inner Start of two jobs overruns its start
// timeout, Healthy fails with both errors joined, each naming its lease, and
// a third job, healthy, adds none; once the calls return, Healthy passes
// again. Readiness stays unaffected.
func TestRegistryHealthy(t *testing.T) {
	one, two := newBlockingJob(), otherBlockingJob{newBlockingJob()}
	t.Cleanup(func() { one.unblock(); two.unblock() }) // if the test fails early
	var reg *fxmodule.Registry
	app := registryApp(t, elector.NewMemoryStore(), "replica", &reg,
		fx.Provide(func() *blockingJob { return one }, func() otherBlockingJob { return two }, func() *countingJob { return newCountingJob(nil) }),
		fxmodule.LeaderJob[*blockingJob]("stuck-1", decorator.WithStartTimeout(100*time.Millisecond)),
		fxmodule.LeaderJob[otherBlockingJob]("stuck-2", decorator.WithStartTimeout(100*time.Millisecond)),
		fxmodule.LeaderJob[*countingJob]("fine"),
	)
	app.RequireStart()
	req := httptest.NewRequest("GET", "/livez", nil)
	var err error
	require.Eventually(t, func() bool {
		err = reg.Healthy(req)
		var joined interface{ Unwrap() []error }
		return errors.As(err, &joined) && len(joined.Unwrap()) == 2
	}, 5*time.Second, 5*time.Millisecond, "both stuck jobs should fail the check")
	assert.ErrorContains(t, err, `lease "stuck-1"`)
	assert.ErrorContains(t, err, `lease "stuck-2"`)
	assert.ErrorContains(t, err, "inner Start overran")
	assert.NotContains(t, err.Error(), `"fine"`)
	assert.NoError(t, reg.Ready(req), "a stuck job does not make the app unready")

	one.unblock()
	two.unblock()
	require.Eventually(t, func() bool { return reg.Healthy(req) == nil }, 5*time.Second, 5*time.Millisecond,
		"the check should recover once the calls return")
	app.RequireStop()
}

// TestRegistryWithoutJobs: Module alone provides an empty Registry, which
// opens no store: Store is nil, Leader says why it cannot answer, the app
// is healthy and, once started, ready.
func TestRegistryWithoutJobs(t *testing.T) {
	path := dbPath(t)
	var reg *fxmodule.Registry
	app := fxtestNew(t, fxmodule.Module(fxmodule.Config{Store: fxmodule.SQLite(path)}), fx.Populate(&reg))
	req := httptest.NewRequest("GET", "/", nil)
	assert.Error(t, reg.Ready(req))
	app.RequireStart()
	assert.Empty(t, reg.Jobs())
	assert.Nil(t, reg.Store())
	_, err := reg.Leader(context.Background(), "x")
	assert.ErrorContains(t, err, "no LeaderJob")
	assert.NoError(t, reg.Healthy(req))
	assert.NoError(t, reg.Ready(req))
	app.RequireStop()
	assertNoFile(t, path)
}

// TestRegistryWithStoreInModule: with WithStore in the module that holds
// the LeaderJob (Module outside it), the Registry gives the job's store,
// and Module's SQLite file is never opened.
func TestRegistryWithStoreInModule(t *testing.T) {
	path := dbPath(t)
	mem := elector.NewMemoryStore()
	inner := newCountingJob(nil)
	var reg *fxmodule.Registry
	app := fxtestNew(t,
		fxmodule.Module(fxmodule.Config{Store: fxmodule.SQLite(path), Elector: fast}),
		fx.Module("jobs",
			fxmodule.WithStore(mem),
			fx.Provide(func() testJob { return inner }),
			fxmodule.LeaderJob[testJob]("mem-job"),
		),
		fx.Populate(&reg),
	)
	app.RequireStart()
	require.Eventually(t, inner.running.Load, 5*time.Second, 5*time.Millisecond)
	assert.Same(t, mem, reg.Store())
	l, err := reg.Leader(context.Background(), "mem-job")
	require.NoError(t, err)
	assert.Equal(t, reg.Jobs()[0].Token, l.Token)
	app.RequireStop()
	assertNoFile(t, path)
}
