package fxmodule_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/fxmodule"
)

// TestWithElectorPerJob runs three jobs in one app with the module's
// timings (TTL 1.5s, renewals every 500ms): one as they are, one with its
// own TTL, one with its own TTL and renewal. Each lease carries its job's
// TTL; the job that set only a TTL renews at TTL/3, not at the module's
// pace; decorator options stand next to WithElector and apply.
func TestWithElectorPerJob(t *testing.T) {
	type (
		moduleJob decorator.Job
		slowJob   decorator.Job
		tunedJob  decorator.Job
	)
	mem := elector.NewMemoryStore()
	var elected atomic.Int64
	jobs := []*countingJob{newCountingJob(nil), newCountingJob(nil), newCountingJob(nil)}
	app := fxtestNew(t,
		fxmodule.Module(fxmodule.Config{Elector: fast}),
		fxmodule.WithStore(mem),
		fx.Provide(
			func() moduleJob { return jobs[0] },
			func() slowJob { return jobs[1] },
			func() tunedJob { return jobs[2] },
		),
		fxmodule.LeaderJob[moduleJob]("module"),
		fxmodule.LeaderJob[slowJob]("slow",
			fxmodule.WithElector(elector.Config{TTL: 30 * time.Second}),
			decorator.WithHooks(decorator.Hooks{OnElected: func(context.Context, elector.Term) { elected.Add(1) }}),
		),
		fxmodule.LeaderJob[tunedJob]("tuned", fxmodule.WithElector(elector.Config{TTL: 3 * time.Second, RenewInterval: 200 * time.Millisecond})),
	)
	app.RequireStart()
	require.Eventually(t, func() bool {
		return jobs[0].running.Load() && jobs[1].running.Load() && jobs[2].running.Load()
	}, 5*time.Second, 5*time.Millisecond)
	assert.EqualValues(t, 1, elected.Load(), "the decorator option next to WithElector should apply")

	lease := func(name string) elector.Lease {
		l, err := mem.Get(t.Context(), name)
		require.NoError(t, err)
		return l
	}
	before := map[string]elector.Lease{"module": lease("module"), "slow": lease("slow"), "tuned": lease("tuned")}
	assert.Equal(t, fast.TTL, before["module"].TTL)
	assert.Equal(t, 30*time.Second, before["slow"].TTL)
	assert.Equal(t, 3*time.Second, before["tuned"].TTL)

	time.Sleep(1600 * time.Millisecond)
	assert.GreaterOrEqual(t, lease("module").Version-before["module"].Version, uint64(2), "the module's job renews every 500ms")
	assert.GreaterOrEqual(t, lease("tuned").Version-before["tuned"].Version, uint64(4), "the tuned job renews every 200ms")
	assert.Equal(t, before["slow"].Version, lease("slow").Version, "a job with TTL 30s renews every 10s, not at the module's pace")
	app.RequireStop()
}

// TestWithElectorRefuses: a per-job Holder, and timings that are bad on
// their own or with the module's, are errors from fx.New naming the job,
// before anything is built or opened.
func TestWithElectorRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  elector.Config
		want []string
	}{
		"holder":           {elector.Config{Holder: "me"}, []string{`fxmodule.LeaderJob[fxmodule_test.testJob]("job")`, `Holder: "me"`, "set it once, in Config.Elector of fxmodule.Module"}},
		"TTL below floor":  {elector.Config{TTL: 50 * time.Millisecond}, []string{`fxmodule.LeaderJob[fxmodule_test.testJob]("job")`, "TTL 50ms"}},
		"renew for module": {elector.Config{RenewInterval: time.Second}, []string{"fxmodule.WithElector with Module's Config.Elector", "RenewInterval 1s"}},
	} {
		t.Run(name, func(t *testing.T) {
			refused(t, tc.want, module(fast), provide[testJob](newCountingJob(nil)),
				func(string, *atomic.Int64) fx.Option {
					return fxmodule.LeaderJob[testJob]("job", fxmodule.WithElector(tc.cfg))
				})
		})
	}
}

// TestNewLeaderJobWithElector: the constructor behind LeaderJob reads
// WithElector too.
func TestNewLeaderJobWithElector(t *testing.T) {
	mem := elector.NewMemoryStore()
	inner := newCountingJob(nil)
	job, err := fxmodule.NewLeaderJob[testJob](inner, mem, "job", fast, fxmodule.WithElector(elector.Config{TTL: time.Minute}))
	require.NoError(t, err)
	require.NoError(t, job.Start(t.Context()))
	require.Eventually(t, inner.running.Load, 5*time.Second, 5*time.Millisecond)
	l, err := mem.Get(t.Context(), "job")
	require.NoError(t, err)
	assert.Equal(t, time.Minute, l.TTL)
	require.NoError(t, job.Stop(t.Context()))

	_, err = fxmodule.NewLeaderJob[testJob](inner, mem, "job", fast, fxmodule.WithElector(elector.Config{Holder: "me"}))
	assert.ErrorContains(t, err, "Holder")
}
