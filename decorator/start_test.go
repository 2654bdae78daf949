package decorator_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

// TestHungOnElectedFreesLease: an OnElected hook that overruns the start
// timeout loses the term: the lease is freed at once (the job has not
// started), the overrun is reported, and when the hook returns the job does
// not start for that term; the campaign goes on.
func TestHungOnElectedFreesLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		b := newBlocker()
		h := &hookLog{}
		job := &fakeJob{}
		d := decorator.Decorate[decorator.Job](job, newElector(t, store, "a"),
			decorator.WithStartTimeout(5*time.Second),
			decorator.WithHooks(h.hooks()),
			decorator.WithHooks(decorator.Hooks{OnElected: func(_ context.Context, t elector.Term) {
				if t.Token() == 1 {
					b.wait()
				}
			}}))
		stopAtEnd(t, b, d)
		require.NoError(t, d.Start(ctx))
		time.Sleep(5 * time.Second)
		synctest.Wait()
		_, err := store.Get(ctx, leaseName)
		require.ErrorIs(t, err, elector.ErrNoLease, "the lease is freed at the start timeout")
		errs := h.getErrs()
		require.Len(t, errs, 1)
		require.EqualError(t, errs[0], "decorator: OnElected hook of *decorator_test.fakeJob did not return within 5s")
		rival, err := newElector(t, store, "b").Campaign(ctx) // a rival leads meanwhile
		require.NoError(t, err)
		require.NoError(t, rival.Resign(ctx))

		b.open()
		synctest.Wait()
		require.Equal(t, []string{"elected 1", "error", "demoted 1", "elected 3"}, h.ev.all(),
			"the gate carries on once the hook returns")
		require.ErrorIs(t, h.getCauses()[0], elector.ErrResigned)
		require.EqualValues(t, 1, job.starts.Load(), "started for term 3 only")
		require.NoError(t, d.Stop(ctx))
	})
}

// TestHungInnerStartAbandonsLease: an inner Start that overruns the start
// timeout may have started the job, so its term is abandoned, not released:
// renewals stop and the lease runs out in the store. When the Start returns,
// the job is stopped and the campaign goes on.
func TestHungInnerStartAbandonsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		b := newBlocker()
		h := &hookLog{}
		job := &fakeJob{}
		job.startFn = func(context.Context) error {
			if job.starts.Load() == 1 {
				b.wait() // ignores its ctx
			}
			return nil
		}
		d := decorator.Decorate[decorator.Job](job, newElector(t, store, "a"),
			decorator.WithStartTimeout(5*time.Second), decorator.WithHooks(h.hooks()))
		stopAtEnd(t, b, d)
		require.NoError(t, d.Start(ctx))
		time.Sleep(5 * time.Second)
		synctest.Wait()
		errs := h.getErrs()
		require.Len(t, errs, 1)
		require.EqualError(t, errs[0], "decorator: inner Start of *decorator_test.fakeJob did not return within 5s")
		renews := store.renews.Load()
		time.Sleep(10 * time.Second)
		require.Equal(t, renews, store.renews.Load(), "no renewals after the start timeout")
		require.Zero(t, store.releases.Load(), "not released")

		b.open()
		time.Sleep(5 * time.Second) // the abandoned lease runs out; re-elected
		synctest.Wait()
		require.EqualValues(t, 1, job.stops.Load(), "the late-started job is stopped")
		require.Equal(t, []string{"elected 1", "error", "demoted 1", "elected 2"}, h.ev.all())
		require.ErrorIs(t, h.getCauses()[0], elector.ErrAbandoned)
		require.EqualValues(t, 2, job.starts.Load())
		require.True(t, job.running())
		require.NoError(t, d.Stop(ctx))
		require.EqualValues(t, 1, store.releases.Load(), "only the second term is released")
	})
}

// TestStopDuringHungOnElected: Stop while OnElected hangs returns within its
// context, and the lease is still freed at the start timeout.
func TestStopDuringHungOnElected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		b := newBlocker()
		job := &fakeJob{}
		d := decorator.Decorate[decorator.Job](job, newElector(t, store, "a"),
			decorator.WithStartTimeout(5*time.Second), decorator.WithLogger(discard),
			decorator.WithHooks(decorator.Hooks{OnElected: func(context.Context, elector.Term) { b.wait() }}))
		stopAtEnd(t, b, d)
		require.NoError(t, d.Start(ctx))
		synctest.Wait()
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		t0 := time.Now()
		require.ErrorIs(t, d.Stop(short), context.DeadlineExceeded)
		require.Equal(t, time.Second, time.Since(t0))
		time.Sleep(4 * time.Second)
		synctest.Wait()
		_, err := store.Get(ctx, leaseName)
		require.ErrorIs(t, err, elector.ErrNoLease, "freed at the start timeout")
		b.open()
		require.NoError(t, d.Stop(ctx))
		require.Zero(t, job.starts.Load())
	})
}

// TestFailedStartReportedAfterRelease: a failed inner Start is reported once
// the lease is free, so a slow OnError hook never holds it.
func TestFailedStartReportedAfterRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		var freeAtReport box[bool]
		job := &fakeJob{startFn: func(context.Context) error { return errors.New("no config") }}
		d := decorator.Decorate[decorator.Job](job, newElector(t, store, "a"),
			decorator.WithBackoff(time.Minute, time.Minute),
			decorator.WithHooks(decorator.Hooks{OnError: func(ctx context.Context, _ error) {
				_, err := store.Get(ctx, leaseName)
				freeAtReport.set(errors.Is(err, elector.ErrNoLease))
			}}))
		stopAtEnd(t, nil, d)
		require.NoError(t, d.Start(ctx))
		synctest.Wait()
		require.True(t, freeAtReport.get(), "the lease is free when OnError runs")
		require.NoError(t, d.Stop(ctx))
	})
}

// TestWatchdogFiresInALaterTerm: the start and stop watchdogs of one run
// share one timer, reset for each term. After a term whose start and stop
// returned in time (armed and disarmed twice), the next term of the same
// run still ends at its start timeout when its OnElected hangs, and after
// that firing, the stop of the term after it still ends at the stop timeout
// when its inner Stop hangs.
func TestWatchdogFiresInALaterTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		hook, stop := newBlocker(), newBlocker()
		h := &hookLog{}
		job := &fakeJob{}
		job.stopFn = func(context.Context) error {
			if job.stops.Load() == 2 {
				stop.wait() // ignores its ctx
			}
			return nil
		}
		d := decorator.Decorate[decorator.Job](job, newElector(t, store, "a"),
			decorator.WithStartTimeout(5*time.Second),
			decorator.WithStopTimeout(4*time.Second),
			decorator.WithHooks(h.hooks()),
			decorator.WithHooks(decorator.Hooks{
				OnElected: func(_ context.Context, t elector.Term) {
					if t.Token() == 2 {
						hook.wait()
					}
				},
				OnDemoted: func(context.Context, elector.Term, error) { store.failRenew.Store(nil) },
			}))
		stopAtEnd(t, hook, d)
		t.Cleanup(stop.open)
		require.NoError(t, d.Start(ctx))
		synctest.Wait()
		store.failRenew.Store(&errStoreDown) // term 1 ends on its own; its job stops in time
		time.Sleep(3 * time.Second)
		synctest.Wait()
		require.Equal(t, []string{"elected 1", "demoted 1", "elected 2"}, h.ev.all())
		require.Empty(t, h.getErrs(), "no watchdog fired in term 1")

		time.Sleep(5 * time.Second) // term 2's start timeout
		synctest.Wait()
		errs := h.getErrs()
		require.Len(t, errs, 1)
		require.EqualError(t, errs[0], "decorator: OnElected hook of *decorator_test.fakeJob did not return within 5s")
		_, err := store.Get(ctx, leaseName)
		require.ErrorIs(t, err, elector.ErrNoLease, "term 2 is resigned at its start timeout")
		hook.open()
		synctest.Wait()
		require.Equal(t, []string{"elected 1", "demoted 1", "elected 2", "error", "demoted 2", "elected 3"}, h.ev.all())
		require.EqualValues(t, 2, job.starts.Load(), "started for terms 1 and 3, not 2")

		begin := time.Now()
		require.ErrorContains(t, d.Stop(ctx), "inner Stop has not returned after 4s")
		require.Equal(t, 4*time.Second, time.Since(begin))
		synctest.Wait() // the watchdog fires at the same instant
		errs = h.getErrs()
		require.Len(t, errs, 2)
		require.EqualError(t, errs[1], "decorator: inner Stop of *decorator_test.fakeJob has not returned after 4s; its lease is left to run out")
		l, err := store.Get(ctx, leaseName)
		require.NoError(t, err, "term 3 is abandoned, not released")
		require.EqualValues(t, 3, l.Token)
		stop.open()
		synctest.Wait()
		require.EqualValues(t, 2, store.releases.Load(), "terms 1 (expired, stopped in time) and 2 only")
	})
}
