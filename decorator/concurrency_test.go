package decorator_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

func TestConcurrentStartStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		var x exclusive
		job := &fakeJob{
			startFn: func(context.Context) error { x.enter(); return nil },
			stopFn:  func(context.Context) error { x.leave(); return nil },
		}
		h := &hookLog{}
		d := decorator.Decorate[decorator.Job](job, newElector(t, store, "a"), decorator.WithHooks(h.hooks()))
		var wg sync.WaitGroup
		for g := range 32 {
			wg.Go(func() {
				for k := range 20 {
					if (g+k)%2 == 0 {
						assert.NoError(t, d.Start(ctx))
					} else {
						assert.NoError(t, d.Stop(ctx))
					}
					time.Sleep(time.Duration(rand.N(200)) * time.Millisecond)
				}
			})
		}
		wg.Wait()
		require.NoError(t, d.Stop(ctx))
		synctest.Wait()
		require.EqualValues(t, 1, x.peak.Load(), "inner jobs running at once")
		require.Zero(t, x.running.Load())
		require.Equal(t, job.starts.Load(), job.stops.Load())
		require.Equal(t, h.elected.Load(), h.demoted.Load())
		require.Positive(t, h.elected.Load())
		require.Zero(t, h.errors.Load())
	})
}

// TestRestartWaitsForPreviousRun uses an elector that grants every campaign
// at once, so only the decorated job keeps two inner jobs from overlapping.
func TestRestartWaitsForPreviousRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var x exclusive
		var startedAt box[[]time.Time]
		job := &fakeJob{
			startFn: func(context.Context) error {
				x.enter()
				startedAt.update(func(v *[]time.Time) { *v = append(*v, time.Now()) })
				return nil
			},
			stopFn: func(context.Context) error {
				time.Sleep(5 * time.Second) // ignores ctx
				x.leave()
				return nil
			},
		}
		e := &fakeElector{}
		d := decorator.Decorate[decorator.Job](job, e)
		t0 := time.Now()
		require.NoError(t, d.Start(ctx))
		synctest.Wait()
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, d.Stop(short), context.DeadlineExceeded)
		synctest.Wait() // the timer goroutine that ended short has exited
		before := bubbleGoroutines()
		for range 50 { // restarts while the old run finishes start nothing and pile up no goroutines
			short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
			require.ErrorIs(t, d.Start(short), context.DeadlineExceeded, "Start waits for the previous run, bounded by its ctx")
			require.ErrorIs(t, d.Stop(short), context.DeadlineExceeded, "Stop waits for the run still finishing")
			cancel()
		}
		synctest.Wait()
		require.Equal(t, before, bubbleGoroutines(), "no goroutine per refused restart")
		require.EqualValues(t, 1, job.starts.Load(), "the new run waits for the old one")
		require.NoError(t, d.Start(ctx), "Start waits until the previous run has finished")
		synctest.Wait()
		require.EqualValues(t, 2, job.starts.Load())
		require.EqualValues(t, 1, x.peak.Load())
		require.Equal(t, []time.Time{t0, t0.Add(5 * time.Second)}, startedAt.get())
		require.NoError(t, d.Stop(ctx))
		require.NoError(t, d.Stop(ctx), "Stop on a stopped job")
		for _, term := range e.allTerms() {
			require.Positive(t, term.resigns.Load())
		}
	})
}

func TestStopWhileCampaigning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		a := decorator.Decorate[decorator.Job](&fakeJob{}, newElector(t, store, "a"))
		require.NoError(t, a.Start(ctx))
		synctest.Wait()
		h := &hookLog{}
		bJob := &fakeJob{}
		b := decorator.Decorate[decorator.Job](bJob, newElector(t, store, "b"), decorator.WithHooks(h.hooks()))
		require.NoError(t, b.Start(ctx))
		time.Sleep(10 * time.Second) // b polls
		t0 := time.Now()
		require.NoError(t, b.Stop(ctx))
		require.Equal(t, t0, time.Now(), "Stop ends the campaign at once")
		require.NoError(t, a.Stop(ctx))
		synctest.Wait()
		require.Zero(t, bJob.starts.Load())
		require.Empty(t, h.ev.all(), "no hooks for a replica that never led")
		_, err := store.Get(ctx, leaseName)
		require.ErrorIs(t, err, elector.ErrNoLease)
	})
}

func TestTermWonAsStopArrives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		grant := make(chan struct{})
		e := &fakeElector{}
		e.campaign = func(context.Context) (elector.Term, error) {
			<-grant // wins regardless of ctx, just as Stop arrives
			return e.newTerm(), nil
		}
		h := &hookLog{}
		job := &fakeJob{}
		d := decorator.Decorate[decorator.Job](job, e, decorator.WithHooks(h.hooks()))
		require.NoError(t, d.Start(ctx))
		synctest.Wait()
		stopped := make(chan error)
		go func() { stopped <- d.Stop(ctx) }()
		synctest.Wait()
		close(grant)
		require.NoError(t, <-stopped)
		terms := e.allTerms()
		require.Len(t, terms, 1)
		require.EqualValues(t, 1, terms[0].resigns.Load(), "the term is resigned")
		require.Zero(t, job.starts.Load(), "the inner job is not started")
		require.Empty(t, h.ev.all(), "no hooks")
	})
}
