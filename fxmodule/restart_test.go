package fxmodule_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"go.uber.org/goleak"

	"github.com/leaderaware/leaderaware/internal/layers"
)

// TestRestart20 builds, starts and stops an app 20 times on one file: every
// time the graph hands out a job decorated exactly once (the same layers.Depth,
// also where a nested module asks for it), the app runs the same number of
// lifecycle hooks, the job runs once per start, and after each Stop goleak finds no goroutine
// that was not there before the first cycle (it counts only those, unlike
// runtime.NumGoroutine, which counts the whole process's).
func TestRestart20(t *testing.T) {
	path := dbPath(t)
	inner := newCountingJob(nil)
	before := goleak.IgnoreCurrent()
	const cycles = 20
	var depth0 int
	var hooks0 int64
	for i := range cycles {
		var got, nested testJob
		hooks := new(hookCounter)
		app := jobApp(t, path, "replica", inner, &got,
			fx.WithLogger(func() fxevent.Logger { return hooks }),
			fx.Module("nested", fx.Populate(&nested)),
		)
		require.NotNil(t, got)
		assert.Same(t, got, nested, "cycle %d: a nested module got another job", i)
		depth := layers.Depth(got)
		if i == 0 {
			depth0 = depth
			require.Equal(t, 1, depth, "the job should be decorated exactly once")
		}
		require.Equal(t, depth0, depth, "cycle %d: the decorated job has another depth", i)

		app.RequireStart()
		require.Eventually(t, inner.running.Load, 5*time.Second, 5*time.Millisecond, "cycle %d: the job did not start", i)
		app.RequireStop()
		require.False(t, inner.running.Load(), "cycle %d: the job still runs after Stop", i)

		n := hooks.onStart.Load() + hooks.onStop.Load()
		if i == 0 {
			hooks0 = n
		}
		require.Equal(t, hooks0, n, "cycle %d: the app ran another number of hooks", i)
		require.NoError(t, goleak.Find(before), "cycle %d: a goroutine left after Stop", i)
	}
	assert.EqualValues(t, cycles, inner.starts.Load())
	assert.EqualValues(t, cycles, inner.stops.Load())
	goleak.VerifyNone(t)
}
