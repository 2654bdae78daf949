package decorator_test

import (
	"context"
	"log/slog"
	"sync"
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
