package decorator_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

type ctxKey string

// ctxSeen is what a job or hook saw of its context.
type ctxSeen struct {
	value    any
	err      error
	deadline time.Duration // from the moment of the call; 0 if none
	token    uint64        // of the term it carries; 0 if none
}

func see(ctx context.Context, key ctxKey) ctxSeen {
	s := ctxSeen{value: ctx.Value(key), err: ctx.Err()}
	if dl, ok := ctx.Deadline(); ok {
		s.deadline = time.Until(dl)
	}
	if t, ok := elector.TermFromContext(ctx); ok {
		s.token = t.Token()
	}
	return s
}

func TestContexts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newCountingStore()
		proceed := make(chan struct{})
		var startSeen, stopSeen, electedSeen, demotedSeen box[ctxSeen]
		var startCtx box[context.Context]
		job := &fakeJob{
			startFn: func(ctx context.Context) error {
				<-proceed // the decorated Start's ctx is cancelled meanwhile
				startSeen.set(see(ctx, "start"))
				startCtx.set(ctx)
				return nil
			},
			stopFn: func(ctx context.Context) error {
				stopSeen.set(see(ctx, "stop"))
				return nil
			},
		}
		d := decorator.Decorate[decorator.Job](job, newElector(t, store, "a"),
			decorator.WithStartTimeout(7*time.Second),
			decorator.WithHooks(decorator.Hooks{
				OnElected: func(ctx context.Context, _ elector.Term) { electedSeen.set(see(ctx, "start")) },
				OnDemoted: func(ctx context.Context, _ elector.Term, _ error) { demotedSeen.set(see(ctx, "start")) },
			}))

		outerCtx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey("start"), "s"))
		require.NoError(t, d.Start(outerCtx))
		synctest.Wait()
		cancel()
		close(proceed)
		synctest.Wait()
		require.Equal(t, ctxSeen{value: "s", deadline: 7 * time.Second, token: 1}, startSeen.get(),
			"inner Start: values of the Start ctx, not its cancellation, the term, the start timeout")
		require.Equal(t, ctxSeen{value: "s", token: 1}, electedSeen.get(), "OnElected ctx")
		require.True(t, job.running(), "the job keeps running after the Start ctx is cancelled")
		require.ErrorIs(t, startCtx.get().Err(), context.Canceled, "the inner Start's ctx ends when it returns")

		stopCtx, stopCancel := context.WithTimeout(context.WithValue(context.Background(), ctxKey("stop"), "x"), time.Minute)
		defer stopCancel()
		require.NoError(t, d.Stop(stopCtx))
		require.Equal(t, ctxSeen{value: "x", deadline: decorator.DefaultStopTimeout, token: 1}, stopSeen.get(),
			"inner Stop gets the caller's ctx, with the term, bounded by the stop timeout")
		require.Equal(t, ctxSeen{value: "s", token: 1}, demotedSeen.get(), "OnDemoted ctx")
	})
}
