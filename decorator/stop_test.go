package decorator_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

// everyLike is an inner job shaped like jobs.Every with a run that ignores
// its context: after the first Stop, its run goes on for runFor. Stop waits
// for the run and returns ctx's error if ctx ends first; a later Stop waits
// again.
type everyLike struct {
	name   string
	runFor time.Duration
	x      *exclusive
	ev     *events

	mu   sync.Mutex
	stop chan struct{} // closed by the first Stop of a run
	done chan struct{} // closed when the run has finished
}

func (j *everyLike) Start(context.Context) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.x.enter()
	j.ev.add("%s inner Start", j.name)
	stop, done := make(chan struct{}), make(chan struct{})
	j.stop, j.done = stop, done
	go func() {
		<-stop
		time.Sleep(j.runFor)
		j.ev.add("%s run finished", j.name)
		j.x.leave()
		close(done)
	}()
	return nil
}

func (j *everyLike) Stop(ctx context.Context) error {
	j.mu.Lock()
	stop, done := j.stop, j.done
	j.stop = nil
	j.mu.Unlock()
	if stop != nil {
		close(stop)
	}
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestStopWithCancelledContextKeepsLease: a Stop whose context is already
// cancelled returns at once, but the lease stays held (and renewed) until the
// inner job has really stopped, and is released then.
func TestStopWithCancelledContextKeepsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		var x exclusive
		h := &hookLog{}
		a := decorator.Decorate[decorator.Job](&everyLike{name: "A", runFor: 5 * time.Second, x: &x, ev: store.ev},
			newElector(t, store, "a"), decorator.WithHooks(h.hooks()))
		b := decorator.Decorate[decorator.Job](&everyLike{name: "B", x: &x, ev: store.ev},
			newElector(t, store, "b"), decorator.WithLogger(discard))
		stopAtEnd(t, nil, a, b)
		require.NoError(t, a.Start(ctx))
		synctest.Wait()
		require.NoError(t, b.Start(ctx))
		synctest.Wait()

		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		t0 := time.Now()
		require.ErrorIs(t, a.Stop(cancelled), context.Canceled, "Stop returns early with its ctx's error")
		time.Sleep(10 * time.Second)
		synctest.Wait()

		require.EqualValues(t, 1, x.peak.Load(), "inner jobs running at once")
		require.Equal(t, []string{"A inner Start", "A run finished", "release a 1", "B inner Start"}, store.ev.all())
		require.Equal(t, t0.Add(5*time.Second), store.ev.at(t, "B inner Start"), "released as soon as the inner Stop returned nil")
		require.Zero(t, h.errors.Load(), "the retried inner Stop succeeded")
		require.Equal(t, []error{elector.ErrResigned}, h.getCauses())
		require.NoError(t, a.Stop(ctx))
		require.NoError(t, b.Stop(ctx))
	})
}

// TestFailedInnerStopAbandonsLease: when the inner Stop fails, the job may
// still run, so the lease is never released: the inner Stop is tried once
// more, then the term is abandoned and the lease runs out in the store. The
// failure is reported once the term is settled.
func TestFailedInnerStopAbandonsLease(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stopErr func() error
	}{
		{"error", func() error { return errBusy }},
		{"panic", func() error { panic(errBusy) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				store := newCountingStore()
				h := &hookLog{}
				var termErrAtReport box[error]
				job := &fakeJob{stopFn: func(context.Context) error { return tc.stopErr() }}
				a := decorator.Decorate[decorator.Job](job, newElector(t, store, "a"),
					decorator.WithHooks(h.hooks()),
					decorator.WithHooks(decorator.Hooks{OnError: func(ctx context.Context, _ error) {
						if term, ok := elector.TermFromContext(ctx); ok {
							termErrAtReport.set(term.Err())
						}
					}}))
				bJob := &fakeJob{startFn: func(context.Context) error { store.ev.add("B inner Start"); return nil }}
				b := decorator.Decorate[decorator.Job](bJob, newElector(t, store, "b"), decorator.WithLogger(discard))
				stopAtEnd(t, nil, a, b)
				require.NoError(t, a.Start(ctx))
				synctest.Wait()
				require.NoError(t, b.Start(ctx))
				time.Sleep(2 * time.Second) // b watches a renewed lease
				synctest.Wait()

				t0 := time.Now()
				require.NoError(t, a.Stop(ctx))
				require.Zero(t, store.releases.Load(), "never released")
				require.EqualValues(t, 2, job.stops.Load(), "the inner Stop is tried again")
				errs := h.getErrs()
				require.Len(t, errs, 1)
				require.ErrorIs(t, errs[0], errBusy)
				require.ErrorContains(t, errs[0], "inner Stop of *decorator_test.fakeJob")
				require.ErrorIs(t, termErrAtReport.get(), elector.ErrAbandoned, "reported after the term was abandoned")
				require.Equal(t, []error{elector.ErrAbandoned}, h.getCauses())

				time.Sleep(10 * time.Second)
				synctest.Wait()
				require.EqualValues(t, 1, bJob.starts.Load())
				require.GreaterOrEqual(t, store.ev.at(t, "B inner Start").Sub(t0), 2*time.Second,
					"the rival waits for the abandoned lease to run out")
				require.NoError(t, b.Stop(ctx))
			})
		})
	}
}

var errBusy = errors.New("still busy")

// blocker is a channel that blocks whoever waits on it until open is called,
// at the latest when the test ends.
type blocker struct {
	ch   chan struct{}
	once sync.Once
}

func newBlocker() *blocker { return &blocker{ch: make(chan struct{})} }

func (b *blocker) wait() { <-b.ch }
func (b *blocker) open() { b.once.Do(func() { close(b.ch) }) }

// stopAtEnd opens b (if any) and stops each job when the test ends, so that
// a failed assertion leaves nothing running in the bubble.
func stopAtEnd(t *testing.T, b *blocker, jobs ...decorator.Job) {
	t.Cleanup(func() {
		if b != nil {
			b.open()
		}
		synctest.Wait() // let a Start that waited on b finish first
		for _, j := range jobs {
			_ = j.Stop(context.Background())
		}
	})
}

// TestTermEndsOnItsOwnAndInnerStopFails: a term that ended on its own is
// abandoned, not released, when the inner Stop fails: the store still holds
// an expired holder's lease, and releasing it would let a rival start while
// the job may still run.
func TestTermEndsOnItsOwnAndInnerStopFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		h := &hookLog{}
		job := &fakeJob{}
		job.stopFn = func(context.Context) error {
			if job.stops.Load() <= 2 {
				return errBusy
			}
			return nil
		}
		d := decorator.Decorate[decorator.Job](job, newElector(t, store, "a"),
			decorator.WithStopTimeout(5*time.Second),
			decorator.WithHooks(h.hooks()),
			decorator.WithHooks(decorator.Hooks{OnDemoted: func(context.Context, elector.Term, error) {
				store.failRenew.Store(nil) // let the next term live
			}}))
		stopAtEnd(t, nil, d)
		require.NoError(t, d.Start(ctx))
		synctest.Wait()
		store.failRenew.Store(&errStoreDown)
		time.Sleep(3 * time.Second) // past the trust window (2.7s)
		synctest.Wait()

		require.Zero(t, store.releases.Load(), "an expired lease whose job may still run is not released")
		require.EqualValues(t, 2, job.stops.Load(), "the inner Stop is tried again")
		require.ErrorIs(t, h.getCauses()[0], elector.ErrLeaseExpired)
		errs := h.getErrs()
		require.Len(t, errs, 1)
		require.ErrorIs(t, errs[0], errBusy)

		time.Sleep(5 * time.Second) // the lease runs out; the campaign goes on
		synctest.Wait()
		require.Equal(t, []string{"elected 1", "error", "demoted 1", "elected 2"}, h.ev.all())
		require.NoError(t, d.Stop(ctx))
		require.EqualValues(t, 1, store.releases.Load())
	})
}

// TestStopReturnsAfterStopTimeout: whatever the gate waits for, Stop given a
// context without a deadline returns after the stop timeout with an error
// naming it, as does a second Stop; a term whose inner Stop overruns is
// abandoned at the stop timeout, and the overrun reported.
func TestStopReturnsAfterStopTimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string // what hangs
		hang    func(b *blocker) (*fakeJob, decorator.Hooks)
		started bool // the inner job started
	}{
		{"inner Stop", func(b *blocker) (*fakeJob, decorator.Hooks) {
			return &fakeJob{stopFn: func(context.Context) error { b.wait(); return nil }}, decorator.Hooks{}
		}, true},
		{"OnDemoted hook", func(b *blocker) (*fakeJob, decorator.Hooks) {
			return &fakeJob{}, decorator.Hooks{OnDemoted: func(context.Context, elector.Term, error) { b.wait() }}
		}, true},
		{"OnElected hook", func(b *blocker) (*fakeJob, decorator.Hooks) {
			return &fakeJob{}, decorator.Hooks{OnElected: func(context.Context, elector.Term) { b.wait() }}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				store := newCountingStore()
				b := newBlocker()
				job, hooks := tc.hang(b)
				h := &hookLog{}
				d := decorator.Decorate[decorator.Job](job, newElector(t, store, "a"),
					decorator.WithStopTimeout(5*time.Second),
					decorator.WithStartTimeout(time.Minute),
					decorator.WithHooks(hooks), decorator.WithHooks(h.hooks()))
				stopAtEnd(t, b, d)
				require.NoError(t, d.Start(ctx))
				synctest.Wait()
				require.Equal(t, tc.started, job.running())

				t0 := time.Now()
				stopped := make(chan error, 1)
				go func() { stopped <- d.Stop(ctx) }()
				time.Sleep(5 * time.Second)
				synctest.Wait()
				want := "decorator: stop *decorator_test.fakeJob: " + tc.name + " has not returned after 5s"
				select {
				case err := <-stopped:
					require.EqualError(t, err, want)
				default:
					t.Fatal("Stop has not returned after the stop timeout")
				}
				require.EqualError(t, d.Stop(ctx), want, "a second Stop waits for the same run")
				require.Equal(t, t0.Add(10*time.Second), time.Now())

				if tc.name == "inner Stop" {
					renews := store.renews.Load()
					time.Sleep(10 * time.Second)
					require.Equal(t, renews, store.renews.Load(), "the term is abandoned: no more renewals")
					require.Zero(t, store.releases.Load(), "and not released")
					errs := h.getErrs()
					require.Len(t, errs, 1)
					require.EqualError(t, errs[0], "decorator: inner Stop of *decorator_test.fakeJob has not returned after 5s; its lease is left to run out")
				}
				b.open()
				require.NoError(t, d.Stop(ctx), "the run ends once what hung returns")
				require.Equal(t, h.elected.Load(), h.demoted.Load())
			})
		})
	}
}

// TestStartWaitsForStuckRunAtMostStopTimeout: a Start after a Stop that
// returned early waits for the previous run, but, given a context without a
// deadline, not longer than the stop timeout.
func TestStartWaitsForStuckRunAtMostStopTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b := newBlocker()
		job := &fakeJob{}
		job.stopFn = func(context.Context) error {
			if job.stops.Load() == 1 {
				b.wait()
			}
			return nil
		}
		d := decorator.Decorate[decorator.Job](job, newElector(t, newCountingStore(), "a"),
			decorator.WithStopTimeout(5*time.Second), decorator.WithLogger(discard))
		stopAtEnd(t, b, d)
		require.NoError(t, d.Start(ctx))
		synctest.Wait()
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		require.ErrorIs(t, d.Stop(short), context.DeadlineExceeded)

		started := make(chan error, 1)
		go func() { started <- d.Start(ctx) }()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		select {
		case err := <-started:
			require.EqualError(t, err, "decorator: start *decorator_test.fakeJob: the previous run is still stopping: inner Stop has not returned after 5s")
		default:
			t.Fatal("Start has not returned after the stop timeout")
		}
		require.EqualValues(t, 1, job.starts.Load(), "nothing started")
		b.open()
		require.NoError(t, d.Start(ctx))
		time.Sleep(5 * time.Second) // the abandoned lease runs out
		synctest.Wait()
		require.EqualValues(t, 2, job.starts.Load())
	})
}
