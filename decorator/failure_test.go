package decorator_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

// attempts records when the inner Start ran.
type attempts struct {
	mu    sync.Mutex
	times []time.Time
}

func (a *attempts) add() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.times = append(a.times, time.Now())
	return len(a.times)
}

func (a *attempts) gaps() []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	var g []time.Duration
	for i := 1; i < len(a.times); i++ {
		g = append(g, a.times[i].Sub(a.times[i-1]))
	}
	return g
}

func TestStartPanicIsResignedAndRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		var at attempts
		job := &fakeJob{startFn: func(context.Context) error {
			if at.add() <= 3 {
				panic("boom")
			}
			return nil
		}}
		h := &hookLog{}
		var freedAtDemote box[[]bool]
		d := decorator.Decorate[decorator.Job](job, newElector(t, store, "a"),
			decorator.WithBackoff(time.Second, 4*time.Second),
			decorator.WithHooks(h.hooks()),
			decorator.WithHooks(decorator.Hooks{OnDemoted: func(ctx context.Context, _ elector.Term, _ error) {
				_, err := store.Get(ctx, leaseName)
				freedAtDemote.update(func(v *[]bool) { *v = append(*v, errors.Is(err, elector.ErrNoLease)) })
			}}),
			decorator.WithLogger(discard))
		t.Cleanup(func() { _ = d.Stop(ctx) })

		require.NoError(t, d.Start(ctx))
		time.Sleep(time.Minute)
		synctest.Wait()
		require.EqualValues(t, 4, job.starts.Load())
		require.True(t, job.running())
		require.EqualValues(t, 3, h.errors.Load())
		require.EqualValues(t, 3, store.releases.Load(), "each failed term is resigned")
		require.Equal(t, []bool{true, true, true}, freedAtDemote.get(), "the lease is free when OnDemoted runs")
		for _, err := range h.getErrs() {
			var pe *decorator.PanicError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, "boom", pe.Value)
			require.Equal(t, "Start", pe.Method)
			require.NotEmpty(t, pe.Stack)
		}
		// Backoff doubles from 1s with jitter in [cur/2, cur], never below min.
		gaps := at.gaps()
		require.Len(t, gaps, 3)
		require.GreaterOrEqual(t, gaps[0], time.Second)
		require.LessOrEqual(t, gaps[0], time.Second)
		require.GreaterOrEqual(t, gaps[1], time.Second)
		require.LessOrEqual(t, gaps[1], 2*time.Second)
		require.GreaterOrEqual(t, gaps[2], 2*time.Second)
		require.LessOrEqual(t, gaps[2], 4*time.Second)

		require.NoError(t, d.Stop(ctx))
		require.Equal(t, h.elected.Load(), h.demoted.Load())
	})
}

func TestCampaignErrorIsReportedAndRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		store.failAcquires.Store(2)
		h := &hookLog{}
		job := &fakeJob{}
		d := decorator.Decorate[decorator.Job](job, newElector(t, store, "a"),
			decorator.WithBackoff(time.Second, time.Second), decorator.WithHooks(h.hooks()))
		start := time.Now()
		require.NoError(t, d.Start(ctx))
		synctest.Wait()
		require.EqualValues(t, 1, h.errors.Load())
		require.Zero(t, job.starts.Load())
		time.Sleep(time.Second)
		synctest.Wait()
		require.EqualValues(t, 2, h.errors.Load())
		time.Sleep(time.Second)
		synctest.Wait()
		require.EqualValues(t, 1, job.starts.Load())
		require.Equal(t, 2*time.Second, time.Since(start))
		for _, err := range h.getErrs() {
			require.ErrorIs(t, err, errStoreDown)
		}
		require.Zero(t, h.demoted.Load(), "no term, no OnDemoted")
		require.NoError(t, d.Stop(ctx))
	})
}

func TestStartErrorThenDemoted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		errStart := errors.New("no config")
		job := &fakeJob{}
		job.startFn = func(ctx context.Context) error {
			if job.starts.Load() > 3 { // retried without backoff: do not spin
				<-ctx.Done()
			}
			return errStart
		}
		h := &hookLog{}
		d := decorator.Decorate[decorator.Job](job, newElector(t, store, "a"),
			decorator.WithBackoff(time.Minute, time.Minute), decorator.WithHooks(h.hooks()))
		require.NoError(t, d.Start(ctx))
		synctest.Wait()
		require.Equal(t, []string{"elected 1", "error", "demoted 1"}, h.ev.all())
		require.ErrorIs(t, h.getErrs()[0], errStart)
		require.ErrorIs(t, h.getCauses()[0], errStart, "OnDemoted cause is the Start error")
		require.EqualValues(t, 1, store.releases.Load())
		// Stop during the backoff: no more transitions.
		require.NoError(t, d.Stop(ctx))
		require.Equal(t, []string{"elected 1", "error", "demoted 1"}, h.ev.all())
		require.Zero(t, job.stops.Load(), "a job whose Start failed is not stopped")
	})
}

func TestTermEndsOnItsOwn(t *testing.T) {
	for _, tc := range []struct {
		name     string
		renewErr error
		want     error
	}{
		{"lost", fmt.Errorf("renew: %w", elector.ErrLeaseLost), elector.ErrLeaseLost},
		{"expired", errStoreDown, elector.ErrLeaseExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				store := newCountingStore()
				h := &hookLog{}
				type stopSeen struct {
					live      bool
					deadline  time.Duration
					token     uint64
					rivalHeld bool // a rival asking the store now is refused
				}
				var seen box[stopSeen]
				job := &fakeJob{stopFn: func(ctx context.Context) error {
					var s stopSeen
					s.live = ctx.Err() == nil
					if dl, ok := ctx.Deadline(); ok {
						s.deadline = time.Until(dl)
					}
					if term, ok := elector.TermFromContext(ctx); ok {
						s.token = term.Token()
					}
					_, err := store.mem.TryAcquire(ctx, leaseName, "rival", time.Second, elector.Lease{})
					s.rivalHeld = errors.Is(err, elector.ErrHeld)
					seen.set(s)
					return nil
				}}
				d := decorator.Decorate[decorator.Job](job, newElector(t, store, "a"),
					decorator.WithStopTimeout(5*time.Second),
					decorator.WithHooks(h.hooks()),
					decorator.WithHooks(decorator.Hooks{OnDemoted: func(context.Context, elector.Term, error) {
						store.failRenew.Store(nil) // let the next term live
					}}))
				require.NoError(t, d.Start(ctx))
				synctest.Wait()
				require.True(t, job.running())
				store.failRenew.Store(&tc.renewErr)

				time.Sleep(3 * time.Second) // past the trust window (2.7s)
				synctest.Wait()
				require.EqualValues(t, 1, job.stops.Load())
				require.Equal(t, stopSeen{live: true, deadline: 5 * time.Second, token: 1, rivalHeld: true}, seen.get(),
					"inner Stop gets a fresh, live ctx with the stop timeout and the term, before the store lets anyone else acquire")
				require.EqualValues(t, 1, h.demoted.Load())
				require.ErrorIs(t, h.getCauses()[0], tc.want)

				// The campaign went on: re-elected with a larger token.
				require.EqualValues(t, 2, job.starts.Load())
				require.True(t, job.running())
				require.Equal(t, []string{"elected 1", "demoted 1", "elected 2"}, h.ev.all())
				assert.Zero(t, h.errors.Load())
				require.NoError(t, d.Stop(ctx))
				require.Equal(t, h.elected.Load(), h.demoted.Load())
			})
		})
	}
}

// panicTerm is a term whose Resign panics.
type panicTerm struct{ *fakeTerm }

func (t panicTerm) Resign(ctx context.Context) error {
	_ = t.fakeTerm.Resign(ctx)
	panic("resign boom")
}

func TestMisbehavingElector(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := &fakeElector{}
		var calls int
		e.campaign = func(context.Context) (elector.Term, error) {
			calls++
			switch calls {
			case 1:
				panic("campaign boom")
			case 2:
				return nil, nil
			default:
				return panicTerm{e.newTerm()}, nil
			}
		}
		h := &hookLog{}
		job := &fakeJob{}
		d := decorator.Decorate[decorator.Job](job, e, decorator.WithHooks(h.hooks()), decorator.WithBackoff(time.Second, time.Second))
		require.NoError(t, d.Start(ctx))
		time.Sleep(2500 * time.Millisecond) // campaigns at 0s, 1s and 2s
		synctest.Wait()
		require.True(t, job.running())
		require.NoError(t, d.Stop(ctx))
		errs := h.getErrs()
		require.Len(t, errs, 3)
		var pe *decorator.PanicError
		require.ErrorAs(t, errs[0], &pe)
		require.Equal(t, "Campaign", pe.Method)
		require.ErrorContains(t, errs[1], "nil term")
		require.ErrorAs(t, errs[2], &pe)
		require.Equal(t, "Resign", pe.Method)
		require.Equal(t, []string{"error", "error", "elected 1", "error", "demoted 1"}, h.ev.all())
	})
}

// TestNoStartAfterTermEndedInOnElected: a term that ends while OnElected runs
// never starts the inner job, and the campaign goes on.
func TestNoStartAfterTermEndedInOnElected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		h := &hookLog{}
		slowOnce := true
		job := &fakeJob{}
		d := decorator.Decorate[decorator.Job](job, newElector(t, store, "a"),
			decorator.WithHooks(decorator.Hooks{OnElected: func(context.Context, elector.Term) {
				if slowOnce {
					slowOnce = false
					store.failRenew.Store(&errStoreDown)
					time.Sleep(3 * time.Second) // past the 2.7s trust window
					store.failRenew.Store(nil)
				}
			}}),
			decorator.WithHooks(h.hooks()))
		require.NoError(t, d.Start(ctx))
		time.Sleep(5 * time.Second)
		synctest.Wait()
		require.Equal(t, []string{"elected 1", "demoted 1", "elected 2"}, h.ev.all())
		require.ErrorIs(t, h.getCauses()[0], elector.ErrLeaseExpired)
		require.EqualValues(t, 1, job.starts.Load(), "only the second term started the job")
		require.NoError(t, d.Stop(ctx))
	})
}

// TestNoStartAfterStopInOnElected: a Stop that arrives while OnElected runs
// means the inner job never starts.
func TestNoStartAfterStopInOnElected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		h := &hookLog{}
		release := make(chan struct{})
		job := &fakeJob{}
		d := decorator.Decorate[decorator.Job](job, newElector(t, store, "a"),
			decorator.WithHooks(decorator.Hooks{OnElected: func(context.Context, elector.Term) { <-release }}),
			decorator.WithHooks(h.hooks()))
		require.NoError(t, d.Start(ctx))
		synctest.Wait()
		stopped := make(chan error)
		go func() { stopped <- d.Stop(ctx) }()
		synctest.Wait()
		close(release)
		require.NoError(t, <-stopped)
		require.Zero(t, job.starts.Load(), "the job must not start after Stop")
		require.Equal(t, []string{"elected 1", "demoted 1"}, h.ev.all())
		require.ErrorIs(t, h.getCauses()[0], elector.ErrResigned)
		_, err := store.mem.Get(ctx, leaseName)
		require.ErrorIs(t, err, elector.ErrNoLease, "the lease is free")
	})
}
