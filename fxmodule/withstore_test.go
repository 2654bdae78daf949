package fxmodule_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/fxmodule"
)

// TestWithStore replaces the SQLite store with a memory store: the job
// campaigns in the memory store (its lease shows up there, under the app's
// holder) and the SQLite file is never created, also when LeaderJob sits in
// a nested module.
func TestWithStore(t *testing.T) {
	for name, nested := range map[string]bool{"top level": false, "LeaderJob in a nested module": true} {
		t.Run(name, func(t *testing.T) {
			path := dbPath(t)
			mem := elector.NewMemoryStore()
			inner := newCountingJob(nil)
			cfg := fast
			cfg.Holder = "memory-replica"
			job := fx.Options(fx.Provide(func() testJob { return inner }), fxmodule.LeaderJob[testJob]("mem-job"))
			if nested {
				job = fx.Module("jobs", job)
			}
			app := fxtestNew(t,
				fxmodule.Module(fxmodule.Config{Store: fxmodule.SQLite(path), Elector: cfg}),
				fxmodule.WithStore(mem),
				job,
			)
			app.RequireStart()
			require.Eventually(t, inner.running.Load, 5*time.Second, 5*time.Millisecond)
			l, err := mem.Get(context.Background(), "mem-job")
			require.NoError(t, err, "the job should hold its lease in the memory store")
			assert.Equal(t, "memory-replica", l.Holder)
			app.RequireStop()
			assert.False(t, inner.running.Load())
			_, err = mem.Get(context.Background(), "mem-job")
			assert.ErrorIs(t, err, elector.ErrNoLease, "Stop should release the lease")
			assertNoFile(t, path)
		})
	}
}

// TestWithStoreDefaultPath checks that with WithStore and no Config.Store,
// the default file is not created in the working directory either.
func TestWithStoreDefaultPath(t *testing.T) {
	t.Chdir(t.TempDir())
	inner := newCountingJob(nil)
	app := fxtestNew(t,
		fxmodule.Module(fxmodule.Config{Elector: fast}),
		fxmodule.WithStore(elector.NewMemoryStore()),
		fx.Provide(func() testJob { return inner }),
		fxmodule.LeaderJob[testJob]("mem-job"),
	)
	app.RequireStart()
	require.Eventually(t, inner.running.Load, 5*time.Second, 5*time.Millisecond)
	app.RequireStop()
	assertNoFile(t, fxmodule.DefaultSQLitePath)
}
