package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/jobs"
)

// untilStopped is a Run function that waits for its context to end.
func untilStopped(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestRunContext(t *testing.T) {
	type key struct{}
	synctest.Test(t, func(t *testing.T) {
		startCtx, cancel := context.WithTimeout(context.WithValue(t.Context(), key{}, "term-7"), time.Second)
		var value atomic.Value
		var finished atomic.Bool
		j := jobs.Run(func(ctx context.Context) error {
			value.Store(ctx.Value(key{}))
			_, hasDeadline := ctx.Deadline()
			assert.False(t, hasDeadline, "fn's context has the Start context's deadline")
			<-ctx.Done()
			time.Sleep(3 * time.Second) // cleanup after cancellation
			finished.Store(true)
			return ctx.Err()
		})
		require.NoError(t, j.Start(startCtx))
		cancel()
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.False(t, finished.Load(), "fn ended with the Start context")
		assert.Equal(t, "term-7", value.Load())

		t0 := time.Now()
		require.NoError(t, j.Stop(t.Context()), "the context's error after Stop is not an error")
		assert.True(t, finished.Load(), "Stop returned before fn")
		assert.Equal(t, 3*time.Second, time.Since(t0))
	})
}

func TestRunStopBoundedByContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var runs atomic.Int64
		j := jobs.Run(func(ctx context.Context) error {
			runs.Add(1)
			<-release // ignores ctx
			return nil
		}, jobs.WithName("consumer"))
		require.NoError(t, j.Start(t.Context()))

		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		err := j.Stop(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.EqualError(t, err, "jobs: stop consumer: run still in progress: context deadline exceeded")

		// A Start now waits for fn, bounded by its ctx.
		sctx, scancel := context.WithTimeout(t.Context(), time.Second)
		defer scancel()
		require.ErrorIs(t, j.Start(sctx), context.DeadlineExceeded)

		close(release)
		require.NoError(t, j.Stop(t.Context()), "a second Stop waits for fn")
		require.NoError(t, j.Start(t.Context()))
		require.NoError(t, j.Stop(t.Context()))
		assert.Equal(t, int64(2), runs.Load())
	})
}

func TestRunStartTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int64
		j := jobs.Run(func(ctx context.Context) error {
			runs.Add(1)
			return nil // returns at once: the job stays started until Stop
		})
		require.NoError(t, j.Start(t.Context()))
		synctest.Wait()
		err := j.Start(t.Context())
		require.ErrorIs(t, err, jobs.ErrAlreadyStarted)
		assert.EqualError(t, err, "jobs: start run: job already started")
		require.NoError(t, j.Stop(t.Context()))
		require.NoError(t, j.Stop(t.Context()), "Stop twice")
		require.NoError(t, j.Start(t.Context()), "Start after Stop")
		require.NoError(t, j.Stop(t.Context()))
		assert.Equal(t, int64(2), runs.Load())
	})
}

func TestRunStopReturnsError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errBoom := errors.New("boom")
		var n atomic.Int64
		j := jobs.Run(func(ctx context.Context) error {
			switch n.Add(1) {
			case 1:
				return errBoom
			case 2:
				<-ctx.Done()
				return fmt.Errorf("flush: %w", errBoom) // not the context's error
			case 3:
				panic(errBoom)
			}
			return untilStopped(ctx)
		})
		require.NoError(t, j.Start(t.Context()))
		synctest.Wait()
		require.Equal(t, errBoom, j.Stop(t.Context()), "Stop returns fn's error as is")
		require.Equal(t, errBoom, j.Stop(t.Context()), "and so does the next Stop")

		require.NoError(t, j.Start(t.Context()))
		require.EqualError(t, j.Stop(t.Context()), "flush: boom", "an error after Stop")

		require.NoError(t, j.Start(t.Context()))
		synctest.Wait()
		err := j.Stop(t.Context())
		var pe *decorator.PanicError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "run", pe.Method, "the panic names the job")
		assert.ErrorIs(t, err, errBoom)
		assert.Contains(t, string(pe.Stack), "run_test.go")

		require.NoError(t, j.Start(t.Context()))
		require.NoError(t, j.Stop(t.Context()), "a new run forgets the old error")
	})
}

func TestRunErrorHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		j := jobs.Run(func(ctx context.Context) error {
			time.Sleep(time.Second)
			panic("kaboom")
		}, jobs.WithErrorHandler(func(ctx context.Context, err error) {
			_ = rec.run(ctx)
			rec.handle(ctx, err)
		}))
		require.NoError(t, j.Start(t.Context()))
		time.Sleep(time.Minute)
		assert.Equal(t, []time.Duration{time.Second}, rec.runs(), "the handler runs when fn returns")
		require.NoError(t, j.Stop(t.Context()), "the handler got the error")
		errs := rec.errors()
		require.Len(t, errs, 1)
		assert.EqualError(t, errs[0], "decorator: panic in run: kaboom")
	})
}

func TestRunRestartLeavesNoGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		checkRestarts(t, jobs.Run(untilStopped), "jobs.(*runJob).run", func() { time.Sleep(time.Second) })
	})
}

func TestRunBadInput(t *testing.T) {
	require.EqualError(t, jobs.Run(nil).Start(t.Context()), "jobs: run: nil function")
	j := jobs.Run(nil, jobs.WithName("consumer"))
	require.EqualError(t, j.Start(t.Context()), "jobs: consumer: nil function")
	require.NoError(t, j.Stop(t.Context()))

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, jobs.Run(untilStopped).Start(ctx), context.Canceled)
}
