package fxmodule_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"go.uber.org/fx/fxtest"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/fxmodule"
	"github.com/leaderaware/leaderaware/internal/testing/pgtest"
)

// testJob is the job type the tests put in the graph.
type testJob decorator.Job

// fast are short timings: a crashed leader is replaced within about 2 s, a
// stopped one at once.
var fast = elector.Config{TTL: 1500 * time.Millisecond, RenewInterval: 500 * time.Millisecond, RetryInterval: 500 * time.Millisecond}

// handoffBound is how soon another app must run the job after the leader
// app stopped. The expected time is tens of milliseconds (the SQLite store
// wakes waiting candidates); the bound leaves a wide margin.
const handoffBound = time.Second

// counters are shared by the inner jobs of several apps.
type counters struct {
	running    atomic.Int64 // inner jobs running now, over all apps
	maxRunning atomic.Int64 // the most that ever ran at once
}

// countingJob is an inner job that counts its Starts and Stops and checks
// that its term is in the context.
type countingJob struct {
	shared  *counters
	starts  atomic.Int64
	stops   atomic.Int64
	running atomic.Bool
	noTerm  atomic.Int64 // Starts without a term in the context
}

func newCountingJob(shared *counters) *countingJob {
	if shared == nil {
		shared = new(counters)
	}
	return &countingJob{shared: shared}
}

func (j *countingJob) Start(ctx context.Context) error {
	if _, ok := elector.TermFromContext(ctx); !ok {
		j.noTerm.Add(1)
	}
	j.starts.Add(1)
	j.running.Store(true)
	n := j.shared.running.Add(1)
	for {
		m := j.shared.maxRunning.Load()
		if n <= m || j.shared.maxRunning.CompareAndSwap(m, n) {
			break
		}
	}
	return nil
}

func (j *countingJob) Stop(context.Context) error {
	j.stops.Add(1)
	if j.running.Swap(false) {
		j.shared.running.Add(-1)
	}
	return nil
}

// hookCounter is an fx logger that counts lifecycle hooks run, and keeps
// fx quiet.
type hookCounter struct {
	onStart, onStop atomic.Int64
}

func (h *hookCounter) LogEvent(e fxevent.Event) {
	switch e.(type) {
	case *fxevent.OnStartExecuting:
		h.onStart.Add(1)
	case *fxevent.OnStopExecuting:
		h.onStop.Add(1)
	}
}

// quiet silences fx's own log.
var quiet = fx.WithLogger(func() fxevent.Logger { return fxevent.NopLogger })

// jobApp returns an app with Module on path, inner as testJob and
// LeaderJob, and puts the job the graph hands out in *got if got is not nil.
func jobApp(t *testing.T, path, holder string, inner *countingJob, got *testJob, extra ...fx.Option) *fxtest.App {
	t.Helper()
	cfg := fast
	cfg.Holder = holder
	opts := []fx.Option{
		quiet,
		fxmodule.Module(fxmodule.Config{Store: fxmodule.SQLite(path), Elector: cfg}),
		fx.Provide(func() testJob { return inner }),
		fxmodule.LeaderJob[testJob]("test-job"),
	}
	if got != nil {
		opts = append(opts, fx.Populate(got))
	}
	return fxtest.New(t, append(opts, extra...)...)
}

// dbPath returns a path for a lease file in a fresh temporary directory.
func dbPath(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "leases.db")
}

// assertNoFile asserts that nothing exists at path.
func assertNoFile(t *testing.T, path string) {
	t.Helper()
	_, err := os.Stat(path)
	assert.Truef(t, errors.Is(err, fs.ErrNotExist), "%s exists (stat error %v); the SQLite file must not be opened", path, err)
}

// fxtestNew is fxtest.New with fx's log silenced.
func fxtestNew(t *testing.T, opts ...fx.Option) *fxtest.App {
	t.Helper()
	return fxtest.New(t, append([]fx.Option{quiet}, opts...)...)
}

// pgDSN returns the DSN of the PostgreSQL test server, or skips t.
func pgDSN(t *testing.T) string { return pgtest.DSN(t) }

// pgSchema returns the name of a fresh schema for the leases, dropped with
// everything in it when t ends.
func pgSchema(t *testing.T, dsn string) string { return pgtest.Schema(t, dsn, "fxmodule_test_") }

// replica is a started app and the inner job it runs.
type replica struct {
	app    *fxtest.App
	job    *countingJob
	holder string
}

// requireHandoff takes two started replicas whose jobs share shared:
// exactly one runs the job, and for two renew intervals the other never
// starts it too; during(leader) runs then. Stopping the leader's app stops
// its job, and the other replica runs the job within handoffBound. It stops
// both apps, and checks that the two never ran the job at once and that
// every inner Start got its term.
func requireHandoff(t *testing.T, shared *counters, a, b replica, during func(leader replica)) {
	t.Helper()
	require.Eventually(t, func() bool { return shared.running.Load() == 1 }, 5*time.Second, 5*time.Millisecond,
		"one of the two apps should run the job")
	assert.Never(t, func() bool { return shared.running.Load() != 1 }, 2*fast.RenewInterval, 10*time.Millisecond,
		"exactly one app should run the job")
	leader, follower := a, b
	if b.job.running.Load() {
		leader, follower = b, a
	}
	require.Zero(t, follower.job.starts.Load(), "the follower must not have started the job")
	if during != nil {
		during(leader)
	}

	stopped := time.Now()
	leader.app.RequireStop()
	assert.False(t, leader.job.running.Load(), "stopping the leader app stops its job")
	assert.EqualValues(t, 1, leader.job.stops.Load())
	require.Eventuallyf(t, follower.job.running.Load, handoffBound, 5*time.Millisecond,
		"the other app should run the job within %v of the leader's stop", handoffBound)
	t.Logf("handoff took %v", time.Since(stopped))

	follower.app.RequireStop()
	assert.False(t, follower.job.running.Load())
	assert.EqualValues(t, 1, shared.maxRunning.Load(), "the two apps ran the job at the same time")
	assert.Zero(t, a.job.noTerm.Load()+b.job.noTerm.Load(), "the inner Start got a context without the term")
}
