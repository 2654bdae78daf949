package fxmodule_test

import (
	"reflect"
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
		return fxmodule.Module(fxmodule.Config{SQLitePath: path, Elector: cfg})
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

func TestLeaderJobRefusesJ(t *testing.T) {
	t.Run("concrete pointer type", func(t *testing.T) {
		refused(t, []string{reflect.TypeFor[*countingJob]().String(), "pointer"},
			module(fast), provide(newCountingJob(nil)), leaderJob[*countingJob]("job"))
	})
	t.Run("interface with an extra method", func(t *testing.T) {
		refused(t, []string{reflect.TypeFor[extraJob]().String(), "Extra"},
			module(fast), provide[extraJob](extraCountingJob{newCountingJob(nil)}), leaderJob[extraJob]("job"))
	})
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
		fxmodule.Module(fxmodule.Config{SQLitePath: path, Elector: fast}),
		fxmodule.WithStore(elector.NewMemoryStore()),
		fx.Provide(func() testJob { return newCountingJob(nil) }),
		fxmodule.LeaderJob[testJob]("job-1"),
		fxmodule.LeaderJob[testJob]("job-2"),
	)
	require.Error(t, app.Err())
	assert.ErrorContains(t, app.Err(), reflect.TypeFor[testJob]().String())
	assertNoFile(t, path)
}
