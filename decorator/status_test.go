package decorator_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

func TestStatusOf(t *testing.T) {
	e := &fakeElector{}
	d := decorator.Decorate[decorator.Job](&fakeJob{}, e)
	st, ok := decorator.StatusOf(d)
	require.True(t, ok)
	require.Same(t, d, st.(decorator.Job), "the decorated job itself")

	p := decorator.Decorate[PriceRefresher](&fakeJob{}, e)
	_, ok = decorator.StatusOf(p)
	require.True(t, ok, "whatever J is")

	wrapped := decorator.Recover()(decorator.Log(discard)(d))
	st, ok = decorator.StatusOf(wrapped)
	require.True(t, ok, "through Unwrap")
	require.Same(t, d, st.(decorator.Job))

	for _, j := range []any{&fakeJob{}, decorator.Recover()(&fakeJob{}), nil, "job"} {
		_, ok := decorator.StatusOf(j)
		require.False(t, ok, "%T", j)
	}
}

func TestHealthCheckOfAJobThatIsNotDecorated(t *testing.T) {
	check := decorator.HealthCheck(decorator.Recover()(&fakeJob{}))
	require.EqualError(t, check(nil), "decorator: HealthCheck: *decorator.recoverJob is not a decorated job and wraps none")
}

// TestStatusFollowerAndLeader: the leader's Snapshot shows its term, and
// its lease's last write; a follower's shows no term. Both are healthy,
// and stay so across a handoff.
func TestStatusFollowerAndLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		a := decorator.Decorate[decorator.Job](&fakeJob{}, newElector(t, store, "a"))
		b := decorator.Decorate[decorator.Job](&fakeJob{}, newElector(t, store, "b"))
		stopAtEnd(t, nil, a, b)
		sa, _ := decorator.StatusOf(a)
		sb, _ := decorator.StatusOf(b)
		idle := decorator.Snapshot{Job: "*decorator_test.fakeJob", Lease: leaseName}
		require.Equal(t, idle, sa.Snapshot(), "not started")
		require.False(t, sa.Leading())

		t0 := time.Now()
		require.NoError(t, a.Start(ctx))
		synctest.Wait()
		require.NoError(t, b.Start(ctx))
		time.Sleep(1500 * time.Millisecond) // a renewed once
		synctest.Wait()

		require.True(t, sa.Leading())
		require.False(t, sb.Leading())
		l, err := store.Get(ctx, leaseName)
		require.NoError(t, err)
		require.WithinDuration(t, t0.Add(time.Second), l.Written, 0, "renewed at 1s")
		snap := sa.Snapshot()
		require.True(t, snap.Since.Equal(t0), "elected at once")
		require.True(t, snap.Renewed.Equal(l.Written), "the lease as last written")
		snap.Since, snap.Renewed = time.Time{}, time.Time{}
		require.Equal(t, decorator.Snapshot{Job: "*decorator_test.fakeJob", Lease: leaseName, Leading: true, Holder: "a", Token: 1,
			TrustRemaining: 2200 * time.Millisecond, TrustKnown: true}, snap, "renewed at 1s: trusted until 3.7s")
		require.Equal(t, idle, sb.Snapshot(), "a follower has no term")
		require.NoError(t, sa.Healthy(nil), "leader healthy")
		require.NoError(t, sb.Healthy(nil), "follower healthy")
		require.NoError(t, decorator.HealthCheck(b)(nil))

		require.NoError(t, a.Stop(ctx))
		synctest.Wait()
		require.Equal(t, idle, sa.Snapshot())
		require.True(t, sb.Leading())
		require.Equal(t, uint64(2), sb.Snapshot().Token)
		require.NoError(t, sa.Healthy(nil))
		require.NoError(t, sb.Healthy(nil))
	})
}

// TestStatusWhileJobStopsAfterTermEnded: once its term has ended the job no
// longer leads, though its term shows until the job has stopped; within the
// stop timeout it is healthy.
func TestStatusWhileJobStopsAfterTermEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newCountingStore()
		job := &fakeJob{stopFn: func(context.Context) error { time.Sleep(4 * time.Second); return nil }}
		d := decorator.Decorate[decorator.Job](job, newElector(t, store, "a"),
			decorator.WithStopTimeout(5*time.Second), decorator.WithLogger(discard),
			decorator.WithHooks(decorator.Hooks{OnDemoted: func(context.Context, elector.Term, error) {
				store.failRenew.Store(nil)
			}}))
		stopAtEnd(t, nil, d)
		st, _ := decorator.StatusOf(d)
		require.NoError(t, d.Start(context.Background()))
		synctest.Wait()
		lost := fmt.Errorf("stolen: %w", elector.ErrLeaseLost)
		store.failRenew.Store(&lost)
		time.Sleep(time.Second + 3900*time.Millisecond) // lost at 1s; 3.9s into the inner Stop
		synctest.Wait()
		snap := st.Snapshot()
		require.False(t, snap.Leading)
		require.False(t, st.Leading())
		require.Equal(t, uint64(1), snap.Token, "the term shows until the job has stopped")
		require.NoError(t, st.Healthy(nil))

		time.Sleep(200 * time.Millisecond) // the inner Stop returned; the next term is won
		synctest.Wait()
		require.True(t, st.Leading())
		require.Equal(t, uint64(2), st.Snapshot().Token)
		require.NoError(t, st.Healthy(nil))
	})
}

// TestHealthInnerStopOverran: an inner Stop that has not returned by the
// stop timeout makes the job unhealthy, with an error naming the job and the
// inner Stop, until it returns: whether Stop was called (the timeout counts
// from the call) or the term expired (it counts from the end of the term:
// the grace past the trust window).
func TestHealthInnerStopOverran(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(d decorator.Job, store *countingStore)
		at   time.Duration // when, from the start, the stop timeout passes
		// leading is whether the job leads while its inner Stop runs: the
		// term of a stopping job is held until the inner Stop returns.
		leading bool
	}{
		{"Stop", func(d decorator.Job, _ *countingStore) {
			time.Sleep(time.Second)
			go func() { _ = d.Stop(context.Background()) }() // returns an error at the stop timeout
		}, time.Second + 5*time.Second, true},
		{"expired", func(_ decorator.Job, store *countingStore) {
			store.failRenew.Store(&errStoreDown)
		}, 2700*time.Millisecond + 5*time.Second, false}, // trust window 2.7s, then the stop timeout
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := newCountingStore()
				b := newBlocker()
				job := &fakeJob{stopFn: func(context.Context) error { b.wait(); return nil }}
				d := decorator.Decorate[decorator.Job](job, newElector(t, store, "a"),
					decorator.WithStopTimeout(5*time.Second), decorator.WithLogger(discard))
				stopAtEnd(t, b, d)
				st, _ := decorator.StatusOf(d)
				t0 := time.Now()
				require.NoError(t, d.Start(context.Background()))
				synctest.Wait()
				require.NoError(t, st.Healthy(nil), "leading")
				tc.end(d, store)

				time.Sleep(time.Until(t0.Add(tc.at - time.Millisecond)))
				synctest.Wait()
				require.Equal(t, tc.leading, st.Leading())
				require.NoError(t, st.Healthy(nil), "within the stop timeout")
				require.Empty(t, st.Snapshot().Overran)

				time.Sleep(3*time.Second + time.Millisecond)
				synctest.Wait()
				require.EqualError(t, st.Healthy(nil), `decorator: leader job *decorator_test.fakeJob (lease "job"): inner Stop overran its timeout of 5s by 3s and has not returned; its term was abandoned, so the job may run while another replica leads`)
				require.EqualError(t, decorator.HealthCheck(d)(nil), st.Healthy(nil).Error())
				snap := st.Snapshot()
				require.Equal(t, "inner Stop", snap.Overran)
				require.True(t, snap.OverranAt.Equal(t0.Add(tc.at)))
				require.False(t, snap.Leading, "abandoned")
				require.Equal(t, uint64(1), snap.Token)

				b.open() // the inner Stop returns
				synctest.Wait()
				require.NoError(t, st.Healthy(nil), "recovers")
				require.Empty(t, st.Snapshot().Overran)
			})
		})
	}
}

// TestHealthInnerStartOverran: an inner Start that has not returned by the
// start timeout has its term abandoned while the job may be starting: the
// job is unhealthy until it returns.
func TestHealthInnerStartOverran(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBlocker()
		job := &fakeJob{}
		job.startFn = func(context.Context) error {
			if job.starts.Load() == 1 {
				b.wait()
			}
			return nil
		}
		d := decorator.Decorate[decorator.Job](job, newElector(t, newCountingStore(), "a"),
			decorator.WithStartTimeout(5*time.Second), decorator.WithLogger(discard))
		stopAtEnd(t, b, d)
		st, _ := decorator.StatusOf(d)
		require.NoError(t, d.Start(context.Background()))
		time.Sleep(5*time.Second - time.Millisecond)
		synctest.Wait()
		require.True(t, st.Leading())
		require.NoError(t, st.Healthy(nil))

		time.Sleep(time.Millisecond)
		synctest.Wait()
		require.False(t, st.Leading(), "abandoned")
		require.EqualError(t, st.Healthy(nil), `decorator: leader job *decorator_test.fakeJob (lease "job"): inner Start overran its timeout of 5s by 0s and has not returned; its term was abandoned, so the job may run while another replica leads`)
		require.Equal(t, "inner Start", st.Snapshot().Overran)

		b.open()
		synctest.Wait()
		require.NoError(t, st.Healthy(nil), "recovers")
		require.NoError(t, d.Stop(context.Background()))
	})
}

// TestHealthyAfterFailedInnerStop: an inner Stop that returned an error
// (twice) has its term abandoned, but it returned: the decorated job takes
// it at its word, and stays healthy.
func TestHealthyAfterFailedInnerStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := decorator.Decorate[decorator.Job](&fakeJob{stopFn: func(context.Context) error { return errBusy }},
			newElector(t, newCountingStore(), "a"), decorator.WithLogger(discard))
		require.NoError(t, d.Start(context.Background()))
		synctest.Wait()
		require.NoError(t, d.Stop(context.Background()))
		require.NoError(t, decorator.HealthCheck(d)(nil))
	})
}

// TestStatusDoesNotAllocate: reading a healthy leader's status allocates
// nothing.
func TestStatusDoesNotAllocate(t *testing.T) {
	d := decorator.Decorate[decorator.Job](&fakeJob{}, &fakeElector{}, decorator.WithLogger(discard))
	require.NoError(t, d.Start(context.Background()))
	defer d.Stop(context.Background())
	st, _ := decorator.StatusOf(d)
	require.Eventually(t, st.Leading, time.Second, time.Millisecond)
	allocs := testing.AllocsPerRun(100, func() {
		_ = st.Leading()
		_ = st.Snapshot()
		_ = st.Healthy(nil)
	})
	require.Zero(t, allocs)
}
