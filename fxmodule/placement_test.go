package fxmodule_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/fxmodule"
)

// Three job types, for apps with three LeaderJobs.
type (
	jobX struct{ *countingJob }
	jobY struct{ *countingJob }
	jobZ struct{ *countingJob }
)

// threeLeases are the lease names of jobX, jobY and jobZ, sorted.
var threeLeases = []string{"x", "y", "z"}

// threeJobApp returns an app on store, as holder, with the LeaderJobs of
// jobX, jobY and jobZ, configured by cfg (its Elector gets fast and
// holder), and puts its Registry in *reg.
func threeJobApp(t *testing.T, store elector.Store, holder string, cfg fxmodule.Config, reg **fxmodule.Registry) *fxtest.App {
	t.Helper()
	cfg.Elector = fast
	cfg.Elector.Holder = holder
	return fxtestNew(t,
		fxmodule.Module(cfg),
		fxmodule.WithStore(store),
		fx.Provide(
			func() *jobX { return &jobX{newCountingJob(nil)} },
			func() *jobY { return &jobY{newCountingJob(nil)} },
			func() *jobZ { return &jobZ{newCountingJob(nil)} },
		),
		fxmodule.LeaderJob[*jobX]("x"),
		fxmodule.LeaderJob[*jobY]("y"),
		fxmodule.LeaderJob[*jobZ]("z"),
		fx.Populate(reg),
	)
}

// leaders returns the holder of each of threeLeases in store ("" if free).
func leaders(t *testing.T, store elector.Store) map[string]string {
	out := map[string]string{}
	for _, name := range threeLeases {
		l, err := store.Get(context.Background(), name)
		if err == nil {
			out[name] = l.Holder
		}
	}
	return out
}

// oneEach reports whether each of holders leads exactly one of threeLeases.
func oneEach(t *testing.T, store elector.Store, holders ...string) bool {
	got := leaders(t, store)
	var by []string
	for _, name := range threeLeases {
		by = append(by, got[name])
	}
	slices.Sort(by)
	return slices.Equal(by, holders)
}

// TestBalance: three apps with the same three jobs on one store, started
// one after another, each lead one (balancing is on by default); each
// Registry lists the three members, with the lease each holds, and who
// waits for each lease. Stopping one drains it: its job moves to another
// app at once.
func TestBalance(t *testing.T) {
	store := elector.NewMemoryStore()
	holders := []string{"app-a", "app-b", "app-c"}
	regs := make([]*fxmodule.Registry, 3)
	apps := make([]*fxtest.App, 3)
	for i, h := range holders {
		apps[i] = threeJobApp(t, store, h, fxmodule.Config{}, &regs[i])
		apps[i].RequireStart()
		if i == 0 {
			require.Eventually(t, func() bool { return oneEach(t, store, "app-a", "app-a", "app-a") }, 5*time.Second, 5*time.Millisecond,
				"the first app alone leads every job")
		}
	}
	require.Eventually(t, func() bool { return oneEach(t, store, holders...) }, 20*time.Second, 10*time.Millisecond,
		"each app should lead one job; they lead %v", leaders(t, store))

	got := leaders(t, store)
	require.Eventually(t, func() bool {
		for _, m := range regs[0].Members() {
			if len(m.Leases) != 1 {
				return false
			}
		}
		return len(regs[0].Members()) == 3
	}, 5*time.Second, 10*time.Millisecond, "A's Registry should list three members with one lease each: %+v", regs[0].Members())
	for i, m := range regs[0].Members() {
		assert.Equal(t, holders[i], m.Holder)
		assert.Equal(t, i == 0, m.Self, "%s is self", m.Holder)
		assert.False(t, m.Draining)
		assert.Equal(t, m.Holder, got[m.Leases[0]], "%s holds %s", m.Holder, m.Leases[0])
		assert.False(t, m.Since.IsZero())
	}
	assert.Equal(t, "app-a", regs[0].Holder())
	for _, name := range threeLeases {
		want := slices.DeleteFunc(slices.Clone(holders), func(h string) bool { return h == got[name] })
		assert.Equal(t, want, regs[0].Waiting(name), "who waits for %s", name)
	}
	assert.Nil(t, regs[0].Waiting("nobody"), "a lease of no LeaderJob")

	// B stops: it drains first, so its job moves at once.
	var bLease string
	for name, h := range got {
		if h == "app-b" {
			bLease = name
		}
	}
	apps[1].RequireStop()
	require.Eventually(t, func() bool {
		h := leaders(t, store)[bLease]
		return h == "app-a" || h == "app-c"
	}, handoffBound, 5*time.Millisecond, "B's lease %s should move to A or C within %v of B's stop", bLease, handoffBound)
	apps[0].RequireStop()
	apps[2].RequireStop()
}

// TestRegistryDrain: Registry.Drain gives every lease of the app to the
// other member and holds back; Resume takes its share again.
func TestRegistryDrain(t *testing.T) {
	store := elector.NewMemoryStore()
	var a, b *fxmodule.Registry
	appA := threeJobApp(t, store, "app-a", fxmodule.Config{}, &a).RequireStart()
	appB := threeJobApp(t, store, "app-b", fxmodule.Config{}, &b).RequireStart()
	count := func(holder string) int {
		n := 0
		for _, h := range leaders(t, store) {
			if h == holder {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return count("app-a") >= 1 && count("app-b") >= 1 && count("app-a")+count("app-b") == 3 }, 20*time.Second, 10*time.Millisecond,
		"A and B should share the jobs: %v", leaders(t, store))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, a.Drain(ctx))
	assert.Empty(t, leading(a), "A leads a job after Drain returned")
	require.Eventually(t, func() bool { return count("app-b") == 3 }, 5*time.Second, 10*time.Millisecond, "B should take every job: %v", leaders(t, store))
	for _, m := range a.Members() {
		if m.Self {
			assert.True(t, m.Draining, "A is draining")
		}
	}
	for _, name := range threeLeases {
		assert.NotContains(t, a.Waiting(name), "app-a", "a draining app waits for nothing")
	}
	assert.Never(t, func() bool { return count("app-a") > 0 }, 2*fast.TTL, 20*time.Millisecond, "a draining app takes no lease")

	a.Resume()
	require.Eventually(t, func() bool { return count("app-a") >= 1 }, 20*time.Second, 10*time.Millisecond, "A should take its share again: %v", leaders(t, store))
	appA.RequireStop()
	appB.RequireStop()
}

// TestNoBalance: with Config.NoBalance the first app keeps every job, and
// the members are still listed.
func TestNoBalance(t *testing.T) {
	store := elector.NewMemoryStore()
	var a, b *fxmodule.Registry
	appA := threeJobApp(t, store, "app-a", fxmodule.Config{NoBalance: true}, &a).RequireStart()
	require.Eventually(t, func() bool { return oneEach(t, store, "app-a", "app-a", "app-a") }, 5*time.Second, 5*time.Millisecond, "A leads every job")
	appB := threeJobApp(t, store, "app-b", fxmodule.Config{NoBalance: true}, &b).RequireStart()
	require.Eventually(t, func() bool { return len(b.Members()) == 2 }, 5*time.Second, 10*time.Millisecond, "B should see both members: %+v", b.Members())
	assert.Never(t, func() bool { return !oneEach(t, store, "app-a", "app-a", "app-a") }, 3*fast.TTL, 20*time.Millisecond, "A keeps every job")
	appB.RequireStop()
	appA.RequireStop()
}

// TestGroupRefused: a bad Config.Group is an error from fx.New naming it,
// before anything is opened.
func TestGroupRefused(t *testing.T) {
	path := dbPath(t)
	app := fx.New(quiet,
		fxmodule.Module(fxmodule.Config{Store: fxmodule.SQLite(path), Group: "bad\ngroup"}),
		fx.Provide(func() *jobX { return &jobX{newCountingJob(nil)} }),
		fxmodule.LeaderJob[*jobX]("x"),
	)
	require.Error(t, app.Err())
	assert.ErrorContains(t, app.Err(), "Config.Group")
	assert.ErrorContains(t, app.Err(), `"bad\ngroup"`)
	assertNoFile(t, path)
}
