package fxmodule_test

import (
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

// concreteApp is jobApp with the job's concrete type, *countingJob, as J:
// it puts what the graph hands out for *countingJob in *got.
func concreteApp(t *testing.T, path, holder string, inner *countingJob, got **countingJob) *fxtest.App {
	t.Helper()
	cfg := fast
	cfg.Holder = holder
	return fxtestNew(t,
		fxmodule.Module(fxmodule.Config{Store: fxmodule.SQLite(path), Elector: cfg}),
		fx.Provide(func() *countingJob { return inner }),
		fxmodule.LeaderJob[*countingJob]("concrete-job"),
		fx.Populate(got),
	)
}

// TestLeaderJobConcrete runs LeaderJob with a concrete J in two apps on one
// file: the graph hands out the job undecorated (the very value its
// constructor returned), nothing starts before the apps do, the lifecycle
// starts it on exactly one app, and stopping that app hands it to the
// other.
func TestLeaderJobConcrete(t *testing.T) {
	path := dbPath(t)
	shared := new(counters)
	a, b := newCountingJob(shared), newCountingJob(shared)
	var gotA, gotB *countingJob
	appA := concreteApp(t, path, "replica-a", a, &gotA)
	appB := concreteApp(t, path, "replica-b", b, &gotB)
	assert.Same(t, a, gotA, "the graph should keep the undecorated job")
	assert.Same(t, b, gotB, "the graph should keep the undecorated job")
	assert.Zero(t, a.starts.Load()+b.starts.Load(), "nothing starts before the app does")
	requireHandoff(t, shared, replica{appA.RequireStart(), a, "replica-a"}, replica{appB.RequireStart(), b, "replica-b"}, nil)
}

// TestLeaderJobConcreteTwice: two LeaderJobs for one concrete J would run
// one job under two leases; fx.New refuses, naming J and both names.
func TestLeaderJobConcreteTwice(t *testing.T) {
	path := dbPath(t)
	app := fx.New(quiet,
		fxmodule.Module(fxmodule.Config{Store: fxmodule.SQLite(path), Elector: fast}),
		fx.Provide(func() *countingJob { return newCountingJob(nil) }),
		fxmodule.LeaderJob[*countingJob]("job-1"),
		fxmodule.LeaderJob[*countingJob]("job-2"),
	)
	require.Error(t, app.Err())
	for _, want := range []string{"*fxmodule_test.countingJob", `"job-1" and "job-2"`, "keep one"} {
		assert.ErrorContains(t, app.Err(), want)
	}
	assertNoFile(t, path)
}

// TestNewLeaderJobConcrete: without fx, a concrete job is decorated as a
// decorator.Job.
func TestNewLeaderJobConcrete(t *testing.T) {
	inner := newCountingJob(nil)
	job, err := fxmodule.NewLeaderJob[decorator.Job](inner, elector.NewMemoryStore(), "plain", fast)
	require.NoError(t, err)
	require.NoError(t, job.Start(t.Context()))
	require.Eventually(t, inner.running.Load, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, job.Stop(t.Context()))
	assert.False(t, inner.running.Load())
}
