package decorator_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

// testPlacer holds its candidate back for hold and hands the channel it
// returns from Lead to the test, which closes it to ask for a handoff.
type testPlacer struct {
	mu     sync.Mutex
	hold   time.Duration
	yields []chan struct{}
}

func (p *testPlacer) Hold(string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hold
}

func (p *testPlacer) setHold(d time.Duration) {
	p.mu.Lock()
	p.hold = d
	p.mu.Unlock()
}

func (p *testPlacer) Lead(string, elector.Term) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := make(chan struct{})
	p.yields = append(p.yields, ch)
	return ch
}

func (p *testPlacer) yieldLast() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.yields[len(p.yields)-1])
}

// A holder asked to yield stops its job while the term is held, frees the
// lease, and reports a handoff; a candidate that holds back less takes the
// lease at once, and the one that yielded waits its hold before it tries.
func TestYieldHandsTheLeaseToAnotherCandidate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := elector.NewMemoryStore()
		var x exclusive
		rec := new(recorder)
		placers := []*testPlacer{{}, {hold: time.Second}}
		inner := make([]*fakeJob, 2)
		jobs := make([]decorator.Job, 2)
		for i, p := range placers {
			e, err := elector.New(store, "lease", elector.Config{Holder: []string{"a", "b"}[i], Placer: p})
			require.NoError(t, err)
			inner[i] = &fakeJob{
				startFn: func(context.Context) error { x.enter(); return nil },
				stopFn:  func(context.Context) error { x.leave(); return nil },
			}
			jobs[i] = decorator.Decorate[decorator.Job](inner[i], e, decorator.WithLogger(discard), decorator.WithObserver(rec))
			t.Cleanup(func() { _ = jobs[i].Stop(ctx) })
		}
		require.NoError(t, jobs[0].Start(ctx))
		synctest.Wait()
		require.True(t, inner[0].running())
		require.NoError(t, jobs[1].Start(ctx))
		synctest.Wait()
		require.False(t, inner[1].running())

		placers[0].setHold(5 * time.Second)
		placers[0].yieldLast()
		synctest.Wait()
		require.False(t, inner[0].running(), "the holder stopped its job")
		time.Sleep(time.Second) // b's hold
		synctest.Wait()
		require.True(t, inner[1].running(), "b took the freed lease after its hold")
		l, err := store.Get(ctx, "lease")
		require.NoError(t, err)
		require.Equal(t, "b", l.Holder)
		rec.mu.Lock()
		var demotions []string
		for _, ev := range rec.events {
			if ev.Kind == elector.EventDemoted {
				demotions = append(demotions, ev.Holder+" "+ev.Cause.String())
			}
		}
		rec.mu.Unlock()
		require.Equal(t, []string{"a handed_off"}, demotions)
		require.EqualValues(t, 1, x.peak.Load(), "inner jobs running at once")

		time.Sleep(10 * time.Second)
		synctest.Wait()
		require.True(t, inner[1].running(), "a, holding back, watches b's renewals and never takes the lease")
		require.False(t, inner[0].running())
	})
}

// A term asked to yield before the job started (a drain that came while
// the candidate acquired) frees the lease without starting the inner job,
// and reports a handoff.
func TestYieldBeforeStartStartsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := elector.NewMemoryStore()
		rec := new(recorder)
		p := new(yieldingPlacer)
		p.n.Store(1000)
		e, err := elector.New(store, "lease", elector.Config{Holder: "a", Placer: p})
		require.NoError(t, err)
		inner := new(fakeJob)
		job := decorator.Decorate[decorator.Job](inner, e, decorator.WithLogger(discard), decorator.WithObserver(rec))
		require.NoError(t, job.Start(ctx))
		synctest.Wait()
		require.NoError(t, job.Stop(ctx))
		require.Zero(t, inner.starts.Load(), "the inner job never starts for a term that yielded")
		_, err = store.Get(ctx, "lease")
		require.ErrorIs(t, err, elector.ErrNoLease, "the lease is free")
		rec.mu.Lock()
		defer rec.mu.Unlock()
		var demotions int
		for _, ev := range rec.events {
			if ev.Kind == elector.EventDemoted {
				demotions++
				require.Equal(t, elector.CauseHandedOff, ev.Cause, "%+v", ev)
			}
		}
		require.NotZero(t, demotions)
	})
}

// panicPlacer's Lead panics the first time.
type panicPlacer struct{ leads atomic.Int32 }

func (p *panicPlacer) Hold(string) time.Duration { return 0 }

func (p *panicPlacer) Lead(string, elector.Term) <-chan struct{} {
	if p.leads.Add(1) == 1 {
		panic("placer bug")
	}
	return nil
}

// A Placer whose Lead panics leaves no term behind that renews the lease
// with nobody to run its job: the lease is led again, by someone.
func TestPanickingLeadLeavesNoTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := elector.NewMemoryStore()
		var inner []*fakeJob
		for i, p := range []elector.Placer{new(panicPlacer), nil} {
			e, err := elector.New(store, "lease", elector.Config{Holder: []string{"a", "b"}[i], Placer: p})
			require.NoError(t, err)
			j := new(fakeJob)
			inner = append(inner, j)
			job := decorator.Decorate[decorator.Job](j, e, decorator.WithLogger(discard))
			require.NoError(t, job.Start(ctx))
			t.Cleanup(func() { _ = job.Stop(ctx) })
			synctest.Wait()
		}
		time.Sleep(2 * elector.DefaultTTL)
		synctest.Wait()
		require.True(t, inner[0].running() || inner[1].running(), "one replica leads the lease")
	})
}

// yieldingPlacer holds nothing back and asks its first n terms to yield
// before Campaign returns them.
type yieldingPlacer struct{ leads, n atomic.Int32 }

func (p *yieldingPlacer) Hold(string) time.Duration { return 0 }

func (p *yieldingPlacer) Lead(string, elector.Term) <-chan struct{} {
	if p.leads.Add(1) > p.n.Load() {
		return nil
	}
	ch := make(chan struct{})
	close(ch)
	return ch
}

// A Placer that yields every term at once and holds nothing back does not
// make the job spin through acquires and releases: terms that yield before
// the job starts back off as failed starts do.
func TestYieldAtOnceBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		p := new(yieldingPlacer)
		p.n.Store(1000)
		e, err := elector.New(elector.NewMemoryStore(), "lease", elector.Config{Holder: "a", Placer: p})
		require.NoError(t, err)
		job := decorator.Decorate[decorator.Job](new(fakeJob), e, decorator.WithLogger(discard))
		require.NoError(t, job.Start(ctx))
		time.Sleep(time.Second)
		require.LessOrEqual(t, p.leads.Load(), int32(20), "terms won in the first second")
		p.n.Store(0)
		require.NoError(t, job.Stop(ctx))
	})
}

// A handoff is a demotion the app asked for: logged at Info, as a
// resignation is, not at Warn.
func TestHandoffLogsAtInfo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var buf syncBuffer
		p := new(testPlacer)
		e, err := elector.New(elector.NewMemoryStore(), "lease", elector.Config{Holder: "a", Placer: p})
		require.NoError(t, err)
		job := decorator.Decorate[decorator.Job](&fakeJob{}, e, decorator.WithLogger(textLogger(&buf, slog.LevelInfo)))
		require.NoError(t, job.Start(ctx))
		synctest.Wait()
		p.yieldLast()
		synctest.Wait()
		require.NoError(t, job.Stop(ctx))
		require.Contains(t, buf.String(), "level=INFO msg=demoted")
		require.Contains(t, buf.String(), "cause=handed_off")
		require.NotContains(t, buf.String(), "level=WARN", "a handoff is no warning")
	})
}
