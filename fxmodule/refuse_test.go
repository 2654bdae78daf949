package fxmodule_test

import (
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/goleak"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/fxmodule"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// extraJob is an interface that a decorated job cannot be returned as: it
// has a method besides Start and Stop.
type extraJob interface {
	decorator.Job
	Extra()
}

// extraCountingJob implements extraJob.
type extraCountingJob struct{ *countingJob }

func (extraCountingJob) Extra() {}

// refused builds an app that must fail in fx.New: it checks that fx.New
// does not panic, that app.Err names every string in want, that nothing was
// constructed, that the SQLite file was not created although an Invoke asks
// for the store, and that no goroutine is left.
func refused(t *testing.T, want []string, opts ...func(path string, built *atomic.Int64) fx.Option) {
	t.Helper()
	path := dbPath(t)
	var built atomic.Int64
	all := []fx.Option{quiet, fx.Invoke(func(*sqlitelease.Store) { built.Add(1) })}
	for _, o := range opts {
		all = append(all, o(path, &built))
	}
	var app *fx.App
	require.NotPanics(t, func() { app = fx.New(all...) })
	err := app.Err()
	require.Error(t, err)
	for _, w := range want {
		assert.ErrorContains(t, err, w)
	}
	assert.Zero(t, built.Load(), "something was constructed")
	assertNoFile(t, path)
	goleak.VerifyNone(t)
}

// module is a refused option: Module on path with cfg.
func module(cfg elector.Config) func(string, *atomic.Int64) fx.Option {
	return func(path string, _ *atomic.Int64) fx.Option {
		return fxmodule.Module(fxmodule.Config{Store: fxmodule.SQLite(path), Elector: cfg})
	}
}

// provide is a refused option: a constructor of J that counts its calls.
func provide[J decorator.Job](j J) func(string, *atomic.Int64) fx.Option {
	return func(_ string, built *atomic.Int64) fx.Option {
		return fx.Provide(func() J { built.Add(1); return j })
	}
}

// leaderJob is a refused option: LeaderJob[J](name).
func leaderJob[J decorator.Job](name string) func(string, *atomic.Int64) fx.Option {
	return func(string, *atomic.Int64) fx.Option { return fxmodule.LeaderJob[J](name) }
}

// TestLeaderJobRefusesJ: an interface J that a decorated job cannot be
// returned as cannot be replaced in the graph; the error says to use the
// concrete type instead.
func TestLeaderJobRefusesJ(t *testing.T) {
	refused(t, []string{reflect.TypeFor[extraJob]().String(), "Extra", "use the job's concrete type"},
		module(fast), provide[extraJob](extraCountingJob{newCountingJob(nil)}), leaderJob[extraJob]("job"))
}

// TestLeaderJobWithoutModule: the fix comes first, and nothing is built.
func TestLeaderJobWithoutModule(t *testing.T) {
	for name, job := range map[string]func(string, *atomic.Int64) fx.Option{
		"interface": leaderJob[testJob]("job"),
		"concrete":  leaderJob[*countingJob]("job"),
	} {
		t.Run(name, func(t *testing.T) {
			var app *fx.App
			var built atomic.Int64
			require.NotPanics(t, func() {
				app = fx.New(quiet, provide[testJob](newCountingJob(nil))("", &built),
					provide(newCountingJob(nil))("", &built), job("", &built))
			})
			require.Error(t, app.Err())
			assert.True(t, strings.HasPrefix(app.Err().Error(), "add fxmodule.Module(fxmodule.Config{...}) to the app: fxmodule.LeaderJob["),
				"the error should start with the fix: %v", app.Err())
			assert.Zero(t, built.Load(), "something was constructed")
		})
	}
}

// TestLeaderJobWithoutJob: a J that nothing provides (or whose constructor
// returned nil) is an error that says to provide it, naming J.
func TestLeaderJobWithoutJob(t *testing.T) {
	for name, opts := range map[string][]fx.Option{
		"interface, none":    {fxmodule.LeaderJob[testJob]("job")},
		"concrete, none":     {fxmodule.LeaderJob[*countingJob]("job")},
		"interface, nil":     {fx.Provide(func() testJob { return nil }), fxmodule.LeaderJob[testJob]("job")},
		"concrete, nil":      {fx.Provide(func() *countingJob { return nil }), fxmodule.LeaderJob[*countingJob]("job")},
		"interface provided": {fx.Provide(newCountingJob), fxmodule.LeaderJob[testJob]("job")},
	} {
		t.Run(name, func(t *testing.T) {
			app := fx.New(append([]fx.Option{quiet, fxmodule.Module(fxmodule.Config{Elector: fast}),
				fxmodule.WithStore(elector.NewMemoryStore()), fx.Supply((*counters)(nil))}, opts...)...)
			require.Error(t, app.Err())
			assert.ErrorContains(t, app.Err(), "provide the job: fxmodule.LeaderJob[")
			assert.ErrorContains(t, app.Err(), "got no ")
		})
	}
}

func TestLeaderJobRefusesName(t *testing.T) {
	for name, lease := range map[string]string{"empty": "", "control character": "job\n1", "too long": string(make([]byte, 256))} {
		t.Run(name, func(t *testing.T) {
			refused(t, []string{"lease name", reflect.TypeFor[testJob]().String()},
				module(fast), provide[testJob](newCountingJob(nil)), leaderJob[testJob](lease))
		})
	}
}

func TestModuleRefusesElectorConfig(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  elector.Config
		want string
	}{
		"negative TTL":             {elector.Config{TTL: -time.Second}, "-1s"},
		"TTL below the floor":      {elector.Config{TTL: 50 * time.Millisecond}, "TTL 50ms"},
		"TTL above the limit":      {elector.Config{TTL: 25 * time.Hour}, "TTL 25h0m0s"},
		"retry above the limit":    {elector.Config{RetryInterval: 25 * time.Hour}, "RetryInterval 25h0m0s"},
		"TTL not above renew":      {elector.Config{TTL: time.Second, RenewInterval: time.Second}, "RenewInterval 1s"},
		"renew leaves no room":     {elector.Config{TTL: time.Second, RenewInterval: 600 * time.Millisecond}, "RenewInterval 600ms"},
		"holder with a line break": {elector.Config{Holder: "a\nb"}, `"a\nb"`},
	} {
		t.Run(name, func(t *testing.T) {
			refused(t, []string{"fxmodule.Module", tc.want},
				module(tc.cfg), provide[testJob](newCountingJob(nil)), leaderJob[testJob]("job"))
		})
	}
}

func TestWithStoreRefusesNil(t *testing.T) {
	refused(t, []string{"fxmodule.WithStore", "nil"}, module(fast), func(string, *atomic.Int64) fx.Option {
		return fxmodule.WithStore(nil)
	})
	refused(t, []string{"fxmodule.WithStore", "nil"}, module(fast), func(string, *atomic.Int64) fx.Option {
		return fxmodule.WithStore((*elector.MemoryStore)(nil))
	})
}

// TestLeaderJobTwiceForOneType shows that a second LeaderJob for the same J
// is an error from fx.New rather than a second layer.
func TestLeaderJobTwiceForOneType(t *testing.T) {
	path := dbPath(t)
	app := fx.New(quiet,
		fxmodule.Module(fxmodule.Config{Store: fxmodule.SQLite(path), Elector: fast}),
		fxmodule.WithStore(elector.NewMemoryStore()),
		fx.Provide(func() testJob { return newCountingJob(nil) }),
		fxmodule.LeaderJob[testJob]("job-1"),
		fxmodule.LeaderJob[testJob]("job-2"),
	)
	require.Error(t, app.Err())
	assert.ErrorContains(t, app.Err(), reflect.TypeFor[testJob]().String())
	assertNoFile(t, path)
}

// otherJob is a second job type in the graph.
type otherJob decorator.Job

// TestLeaderJobRefusesSharedLeaseName: two jobs under one lease name would
// share one lease, so only one of them would ever run. fx.New refuses,
// naming both job types and the name, before anything is constructed or
// opened: also when the two LeaderJobs sit in different modules.
func TestLeaderJobRefusesSharedLeaseName(t *testing.T) {
	want := []string{reflect.TypeFor[testJob]().String(), reflect.TypeFor[otherJob]().String(), `"shared"`}
	jobs := []func(string, *atomic.Int64) fx.Option{
		provide[testJob](newCountingJob(nil)), provide[otherJob](newCountingJob(nil)),
		leaderJob[testJob]("shared"), leaderJob[otherJob]("shared"),
	}
	t.Run("one module", func(t *testing.T) {
		refused(t, want, append([]func(string, *atomic.Int64) fx.Option{module(fast)}, jobs...)...)
	})
	t.Run("sibling modules", func(t *testing.T) {
		refused(t, want, module(fast),
			func(path string, built *atomic.Int64) fx.Option {
				return fx.Module("a", jobs[0](path, built), jobs[2](path, built))
			},
			func(path string, built *atomic.Int64) fx.Option {
				return fx.Module("b", jobs[1](path, built), jobs[3](path, built))
			})
	})
}

// TestLeaderJobDistinctLeaseNames: two jobs with lease names of their own
// both run.
func TestLeaderJobDistinctLeaseNames(t *testing.T) {
	a, b := newCountingJob(nil), newCountingJob(nil)
	app := fxtestNew(t,
		fxmodule.Module(fxmodule.Config{Store: fxmodule.SQLite(dbPath(t)), Elector: fast}),
		fx.Provide(func() testJob { return a }, func() otherJob { return b }),
		fxmodule.LeaderJob[testJob]("job-a"),
		fxmodule.LeaderJob[otherJob]("job-b"),
	)
	app.RequireStart()
	require.Eventually(t, func() bool { return a.running.Load() && b.running.Load() }, 5*time.Second, 5*time.Millisecond)
	app.RequireStop()
}
