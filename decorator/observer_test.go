package decorator_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

// recorder is an Observer that keeps every event, and a line per event
// (and per note) in order.
type recorder struct {
	mu     sync.Mutex
	events []elector.Event
	lines  []string
}

func (r *recorder) Observe(e elector.Event) {
	line := fmt.Sprintf("%s %s %s token=%d", e.Kind, e.Lease, e.Holder, e.Token)
	switch e.Kind {
	case elector.EventJobStart, elector.EventJobStop:
		line += fmt.Sprintf(" %s in %v", e.Result, e.Duration)
	case elector.EventFenced:
		line += " " + e.Result.String()
	case elector.EventDemoted:
		line += " " + e.Cause.String()
	case elector.EventElected:
		line += fmt.Sprintf(" trust=%v", e.Trust)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	r.lines = append(r.lines, line)
}

// note adds a line that is not an event, such as a hook call.
func (r *recorder) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, s)
}

// take returns the lines so far and forgets them.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lines
	r.lines = nil
	return l
}

// all returns the events so far.
func (r *recorder) all() []elector.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]elector.Event(nil), r.events...)
}

// ofKind returns the events of kind k so far.
func (r *recorder) ofKind(k elector.EventKind) []elector.Event {
	var out []elector.Event
	for _, e := range r.all() {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// causes returns the causes of the demotions so far.
func (r *recorder) causes() []elector.Cause {
	var out []elector.Cause
	for _, e := range r.ofKind(elector.EventDemoted) {
		out = append(out, e.Cause)
	}
	return out
}

// requireOneDemotedPerElected checks that the terms r saw alternate:
// elected k, then demoted k, then the next term.
func (r *recorder) requireOneDemotedPerElected(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var open uint64
	for _, e := range r.events {
		switch e.Kind {
		case elector.EventElected:
			require.Zero(t, open, "elected %d before term %d was demoted", e.Token, open)
			open = e.Token
		case elector.EventDemoted:
			require.Equal(t, open, e.Token, "demoted a term that is not the elected one")
			open = 0
		}
	}
	require.Zero(t, open, "term %d never demoted", open)
}

// TestObserverReportsTermAndJobCalls: a decorated job with an observer
// reports its term and the inner calls, before the hooks of the same
// transition, with the lease, holder, token and how long each call took.
func TestObserverReportsTermAndJobCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		rec := &recorder{}
		job := &fakeJob{
			startFn: func(context.Context) error { time.Sleep(100 * time.Millisecond); return nil },
			stopFn:  func(context.Context) error { time.Sleep(200 * time.Millisecond); return nil },
		}
		d := decorator.Decorate[decorator.Job](job, newElector(t, newCountingStore(), "a"),
			decorator.WithObserver(rec),
			decorator.WithHooks(decorator.Hooks{
				OnElected: func(context.Context, elector.Term) { rec.note("OnElected") },
				OnDemoted: func(context.Context, elector.Term, error) { rec.note("OnDemoted") },
			}))
		stopAtEnd(t, nil, d)
		require.NoError(t, d.Start(ctx))
		time.Sleep(time.Second)
		synctest.Wait()
		require.Equal(t, []string{
			"elected job a token=1 trust=2.7s", // the trust window of the acquire
			"OnElected",
			"job_start job a token=1 ok in 100ms",
		}, rec.take())

		require.NoError(t, d.Stop(ctx))
		require.Equal(t, []string{
			"job_stop job a token=1 ok in 200ms",
			"demoted job a token=1 resigned",
			"OnDemoted",
		}, rec.take())
		require.NoError(t, rec.ofKind(elector.EventDemoted)[0].Err, "no error for a resignation")
	})
}

// TestObserverCauses: each way a term ends is reported with its cause, once
// per term, and the errors with it.
func TestObserverCauses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cause elector.Cause
		err   error // the demotion's Err matches it
		job   func() *fakeJob
		// end makes the term end; it returns after the demotion.
		end func(t *testing.T, store *countingStore, d decorator.Job)
		// calls are the inner calls reported, with their results.
		calls []string
	}{
		{"Stop", elector.CauseResigned, nil, func() *fakeJob { return &fakeJob{} },
			func(t *testing.T, _ *countingStore, d decorator.Job) {
				require.NoError(t, d.Stop(context.Background()))
			},
			[]string{"job_start ok", "job_stop ok"}},
		{"lost", elector.CauseLost, elector.ErrLeaseLost, func() *fakeJob { return &fakeJob{} },
			func(t *testing.T, store *countingStore, _ decorator.Job) {
				lost := fmt.Errorf("stolen: %w", elector.ErrLeaseLost)
				store.failRenew.Store(&lost)
				time.Sleep(time.Second) // the next renewal
			},
			[]string{"job_start ok", "job_stop ok"}},
		{"expired", elector.CauseExpired, elector.ErrLeaseExpired, func() *fakeJob { return &fakeJob{} },
			func(t *testing.T, store *countingStore, _ decorator.Job) {
				store.failRenew.Store(&errStoreDown)
				time.Sleep(3 * time.Second) // past the trust window (2.7s)
			},
			[]string{"job_start ok", "job_stop ok"}},
		{"start failed", elector.CauseStartFailed, errBusy,
			func() *fakeJob { return &fakeJob{startFn: func(context.Context) error { return errBusy }} },
			func(t *testing.T, _ *countingStore, _ decorator.Job) {},
			[]string{"job_start error"}},
		{"inner Stop failed", elector.CauseAbandoned, elector.ErrAbandoned,
			func() *fakeJob { return &fakeJob{stopFn: func(context.Context) error { return errBusy }} },
			func(t *testing.T, _ *countingStore, d decorator.Job) {
				require.NoError(t, d.Stop(context.Background()))
			},
			[]string{"job_start ok", "job_stop error", "job_stop error"}}, // tried twice
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := newCountingStore()
				rec := &recorder{}
				d := decorator.Decorate[decorator.Job](tc.job(), newElector(t, store, "a"),
					decorator.WithObserver(rec), decorator.WithLogger(discard),
					decorator.WithHooks(decorator.Hooks{OnDemoted: func(context.Context, elector.Term, error) {
						store.failRenew.Store(nil) // let a next term live
					}}))
				stopAtEnd(t, nil, d)
				require.NoError(t, d.Start(context.Background()))
				synctest.Wait()
				tc.end(t, store, d)
				synctest.Wait()

				demoted := rec.ofKind(elector.EventDemoted)
				require.NotEmpty(t, demoted)
				require.Equal(t, tc.cause, demoted[0].Cause)
				require.Equal(t, uint64(1), demoted[0].Token)
				if tc.err == nil {
					require.NoError(t, demoted[0].Err)
				} else {
					require.ErrorIs(t, demoted[0].Err, tc.err)
				}
				var calls []string
				for _, e := range rec.all() {
					if e.Token == 1 && (e.Kind == elector.EventJobStart || e.Kind == elector.EventJobStop) {
						calls = append(calls, fmt.Sprintf("%s %s", e.Kind, e.Result))
						if e.Result == elector.ResultError {
							require.ErrorIs(t, e.Err, errBusy)
						}
					}
				}
				require.Equal(t, tc.calls, calls)

				require.NoError(t, d.Stop(context.Background()))
				rec.requireOneDemotedPerElected(t)
			})
		})
	}
}

// TestObserverOneDemotedPerElected: over terms that end every way the gate
// knows, including the watchdogs' (an OnElected or inner Start that
// overruns the start timeout), each term is reported elected once and
// demoted once, in order.
func TestObserverOneDemotedPerElected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		rec := &recorder{}
		e := &fakeElector{}
		token := func(ctx context.Context) uint64 {
			term, _ := elector.TermFromContext(ctx)
			return term.Token()
		}
		job := &fakeJob{
			startFn: func(ctx context.Context) error {
				switch token(ctx) {
				case 2:
					return errBusy
				case 5:
					time.Sleep(6 * time.Second) // overruns the start timeout, then starts
				}
				return nil
			},
			stopFn: func(ctx context.Context) error {
				if token(ctx) == 3 {
					return errBusy
				}
				return nil
			},
		}
		d := decorator.Decorate[decorator.Job](job, e,
			decorator.WithObserver(rec), decorator.WithLogger(discard),
			decorator.WithStartTimeout(5*time.Second), decorator.WithBackoff(time.Second, time.Second),
			decorator.WithHooks(decorator.Hooks{OnElected: func(_ context.Context, t elector.Term) {
				if t.Token() == 4 {
					time.Sleep(6 * time.Second) // overruns the start timeout
				}
			}}))
		stopAtEnd(t, nil, d)
		require.NoError(t, d.Start(ctx))
		for tok := uint64(1); tok <= 5; tok++ {
			time.Sleep(10 * time.Second)
			synctest.Wait()
			if terms := e.allTerms(); uint64(len(terms)) == tok {
				terms[tok-1].end(elector.ErrLeaseLost) // the term is lost, if still running
			}
		}
		synctest.Wait()
		require.NoError(t, d.Stop(ctx))
		rec.requireOneDemotedPerElected(t)
		require.Equal(t, []elector.Cause{
			elector.CauseLost,        // 1
			elector.CauseStartFailed, // 2
			elector.CauseLost,        // 3: its inner Stop failed after it was lost
			elector.CauseResigned,    // 4: OnElected overran
			elector.CauseAbandoned,   // 5: the inner Start overran
			elector.CauseResigned,    // 6: Stop
		}, rec.causes())
	})
}

// TestObserverInJobContexts: the inner Start's and Stop's contexts carry
// the observer, so fenced writes of the inner job report to it, even with
// the context the application passed to Stop.
func TestObserverInJobContexts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		job := &fakeJob{
			startFn: func(ctx context.Context) error { elector.ObserveFenced(ctx, nil); return nil },
			stopFn: func(ctx context.Context) error {
				elector.ObserveFenced(ctx, fmt.Errorf("write: %w", elector.ErrLeaseLost))
				return nil
			},
		}
		d := decorator.Decorate[decorator.Job](job, newElector(t, newCountingStore(), "a"), decorator.WithObserver(rec))
		stopAtEnd(t, nil, d)
		require.NoError(t, d.Start(context.Background()))
		synctest.Wait()
		require.NoError(t, d.Stop(context.Background()))
		var fenced []string
		for _, line := range rec.take() {
			if strings.HasPrefix(line, "fenced") {
				fenced = append(fenced, line)
			}
		}
		require.Equal(t, []string{"fenced_write job a token=1 ok", "fenced_write job a token=1 lost"}, fenced)
	})
}

// trustTerm is a fake term that tells how long it is still trusted.
type trustTerm struct {
	*fakeTerm
	trust time.Duration
}

func (t trustTerm) TrustRemaining() time.Duration {
	if t.Err() != nil {
		return 0
	}
	return t.trust
}

// TestObserverTrust: a term that tells its trust (TrustRemaining) has it
// reported with its election and in the Snapshot.
func TestObserverTrust(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		e := &fakeElector{}
		e.campaign = func(context.Context) (elector.Term, error) {
			return trustTerm{e.newTerm(), 2 * time.Second}, nil
		}
		d := decorator.Decorate[decorator.Job](&fakeJob{}, e, decorator.WithObserver(rec))
		stopAtEnd(t, nil, d)
		require.NoError(t, d.Start(context.Background()))
		synctest.Wait()
		require.Equal(t, 2*time.Second, rec.ofKind(elector.EventElected)[0].Trust)
		st, ok := decorator.StatusOf(d)
		require.True(t, ok)
		snap := st.Snapshot()
		require.True(t, snap.TrustKnown)
		require.Equal(t, 2*time.Second, snap.TrustRemaining)
		require.NoError(t, d.Stop(context.Background()))
	})
}
