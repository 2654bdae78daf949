package jobs_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/jobs"
)

var _ decorator.Job = (*jobs.EveryJob)(nil)

func TestEveryRunsEveryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		j := jobs.Every(time.Minute, rec.run)
		require.NoError(t, j.Start(t.Context()))
		time.Sleep(5*time.Minute + time.Second)
		require.NoError(t, j.Stop(t.Context()))
		assert.Equal(t, []time.Duration{1 * time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute}, rec.runs())
	})
}

func TestEveryStartToStartWhenRunTakesTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		j := jobs.Every(time.Minute, func(ctx context.Context) error {
			_ = rec.run(ctx)
			time.Sleep(20 * time.Second)
			return nil
		})
		require.NoError(t, j.Start(t.Context()))
		time.Sleep(3*time.Minute + time.Second)
		require.NoError(t, j.Stop(t.Context()))
		assert.Equal(t, []time.Duration{1 * time.Minute, 2 * time.Minute, 3 * time.Minute}, rec.runs())
	})
}

func TestEveryImmediate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		j := jobs.Every(time.Minute, rec.run, jobs.WithImmediate())
		require.NoError(t, j.Start(t.Context()))
		synctest.Wait()
		assert.Equal(t, []time.Duration{0}, rec.runs(), "first run at Start")
		time.Sleep(2*time.Minute + time.Second)
		require.NoError(t, j.Stop(t.Context()))
		assert.Equal(t, []time.Duration{0, time.Minute, 2 * time.Minute}, rec.runs())
	})
}

func TestEveryNeverOverlaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var inFlight, maxInFlight, runs atomic.Int64
		j := jobs.Every(time.Second, func(ctx context.Context) error {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for {
				m := maxInFlight.Load()
				if n <= m || maxInFlight.CompareAndSwap(m, n) {
					break
				}
			}
			runs.Add(1)
			time.Sleep(2500 * time.Millisecond) // slower than the interval
			return nil
		})
		require.NoError(t, j.Start(t.Context()))
		time.Sleep(time.Minute)
		require.NoError(t, j.Stop(t.Context()))
		assert.Equal(t, int64(1), maxInFlight.Load())
		assert.Zero(t, inFlight.Load(), "Stop returned while a run was in flight")
		// First run at 1s, then back to back every 2.5s: missed periods are
		// skipped, not queued.
		assert.Equal(t, int64(24), runs.Load())
	})
}

func TestEveryStopWaitsForRunningFunction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started := make(chan struct{})
		var finished atomic.Bool
		j := jobs.Every(time.Second, func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			time.Sleep(3 * time.Second) // cleanup after cancellation
			finished.Store(true)
			return ctx.Err()
		})
		require.NoError(t, j.Start(t.Context()))
		<-started
		t0 := time.Now()
		require.NoError(t, j.Stop(t.Context()))
		assert.True(t, finished.Load(), "Stop returned before the run")
		assert.Equal(t, 3*time.Second, time.Since(t0))
	})
}

func TestEveryStopBoundedByContextWhenFunctionIgnoresCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started := make(chan struct{})
		release := make(chan struct{})
		var fnCtxErr atomic.Value
		j := jobs.Every(time.Second, func(ctx context.Context) error {
			close(started)
			<-release // ignores ctx
			fnCtxErr.Store(ctx.Err())
			return nil
		})
		require.NoError(t, j.Start(t.Context()))
		<-started

		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		t0 := time.Now()
		err := j.Stop(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 5*time.Second, time.Since(t0))

		// A Start now must wait for the old goroutine, bounded by its ctx.
		sctx, scancel := context.WithTimeout(t.Context(), time.Second)
		defer scancel()
		require.ErrorIs(t, j.Start(sctx), context.DeadlineExceeded)

		close(release)
		require.NoError(t, j.Stop(t.Context()), "a second Stop waits for the goroutine")
		assert.ErrorIs(t, fnCtxErr.Load().(error), context.Canceled, "the run context was cancelled by Stop")
	})
}

func TestEveryRunContextOutlivesStartContext(t *testing.T) {
	type key struct{}
	synctest.Test(t, func(t *testing.T) {
		startCtx, cancel := context.WithTimeout(context.WithValue(t.Context(), key{}, "term-7"), 15*time.Second)
		type seen struct {
			value any
			err   error
		}
		runs := make(chan seen, 10)
		j := jobs.Every(time.Minute, func(ctx context.Context) error {
			_, hasDeadline := ctx.Deadline()
			assert.False(t, hasDeadline, "run context inherited the start deadline")
			runs <- seen{ctx.Value(key{}), ctx.Err()}
			return nil
		})
		require.NoError(t, j.Start(startCtx))
		cancel()
		time.Sleep(2*time.Minute + time.Second)
		require.NoError(t, j.Stop(t.Context()))
		close(runs)
		var n int
		for s := range runs {
			n++
			assert.Equal(t, "term-7", s.value)
			assert.NoError(t, s.err)
		}
		assert.Equal(t, 2, n)
	})
}

func TestEveryRestartLeavesNoGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int64
		j := jobs.Every(time.Second, func(ctx context.Context) error {
			runs.Add(1)
			return nil
		}, jobs.WithImmediate())
		checkRestarts(t, j, "jobs.(*EveryJob).loop", func() { time.Sleep(1500 * time.Millisecond) })
		assert.Equal(t, int64(40), runs.Load(), "two runs per cycle")
	})
}

func TestEveryStartTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int64
		j := jobs.Every(time.Second, func(ctx context.Context) error {
			runs.Add(1)
			return nil
		})
		require.NoError(t, j.Start(t.Context()))
		err := j.Start(t.Context())
		require.ErrorIs(t, err, jobs.ErrAlreadyStarted)
		assert.ErrorContains(t, err, "every 1s")
		time.Sleep(10*time.Second + time.Millisecond)
		require.NoError(t, j.Stop(t.Context()))
		assert.Equal(t, int64(10), runs.Load(), "a second goroutine was started")
		require.NoError(t, j.Stop(t.Context()), "Stop twice")
	})
}

func TestEveryStopBeforeStart(t *testing.T) {
	j := jobs.Every(time.Second, func(context.Context) error { return nil })
	require.NoError(t, j.Stop(t.Context()))
}

func TestEveryStartWithEndedContext(t *testing.T) {
	j := jobs.Every(time.Second, func(context.Context) error { return nil })
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, j.Start(ctx), context.Canceled)
	require.NoError(t, j.Stop(t.Context()))
}

func TestEveryBadInput(t *testing.T) {
	ok := func(context.Context) error { return nil }
	tests := []struct {
		name string
		job  *jobs.EveryJob
		want string
	}{
		{"zero interval", jobs.Every(0, ok), "Every(0s): interval must be positive"},
		{"negative interval", jobs.Every(-time.Second, ok), "Every(-1s): interval must be positive"},
		{"nil function", jobs.Every(time.Second, nil), "Every(1s): nil function"},
		{"jitter 1", jobs.Every(time.Second, ok, jobs.WithJitter(1)), "WithJitter(1): fraction must be in [0, 1)"},
		{"negative jitter", jobs.Every(time.Second, ok, jobs.WithJitter(-0.1)), "WithJitter(-0.1)"},
		{"zero run timeout", jobs.Every(time.Second, ok, jobs.WithRunTimeout(0)), "WithRunTimeout(0s): timeout must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = tt.job.Start(t.Context()) })
			require.ErrorContains(t, err, tt.want)
			require.NoError(t, tt.job.Stop(t.Context()))
		})
	}
}

func TestEveryErrorHandlerGetsErrorsAndPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errBoom := errors.New("boom")
		rec := newRecorder()
		var n int
		j := jobs.Every(time.Second, func(ctx context.Context) error {
			n++
			switch n {
			case 1:
				return errBoom
			case 2:
				panic("kaboom")
			case 3:
				panic(errBoom)
			}
			return nil
		}, jobs.WithErrorHandler(rec.handle))
		require.NoError(t, j.Start(t.Context()))
		time.Sleep(4*time.Second + time.Millisecond)
		require.NoError(t, j.Stop(t.Context()))
		assert.Equal(t, 4, n, "the schedule goes on after a panic")
		got := rec.errors()
		require.Len(t, got, 3)
		assert.Equal(t, errBoom, got[0], "the handler gets fn's error as is")
		var pe *decorator.PanicError
		require.ErrorAs(t, got[1], &pe)
		assert.Equal(t, "kaboom", pe.Value)
		assert.Equal(t, "every 1s", pe.Method, "the panic names the job")
		assert.Contains(t, string(pe.Stack), "every_test.go")
		assert.EqualError(t, got[1], "decorator: panic in every 1s: kaboom")
		assert.ErrorIs(t, got[2], errBoom, "a panic with an error unwraps to it")
	})
}

func TestEveryPanickingErrorHandlerIsContained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int64
		j := jobs.Every(time.Second, func(ctx context.Context) error {
			runs.Add(1)
			return errors.New("x")
		}, jobs.WithErrorHandler(func(context.Context, error) { panic("handler") }))
		restore := captureDefaultLog(t)
		require.NoError(t, j.Start(t.Context()))
		time.Sleep(2*time.Second + time.Millisecond)
		require.NoError(t, j.Stop(t.Context()))
		assert.Equal(t, int64(2), runs.Load())
		assert.Contains(t, restore(), "error handler panicked")
	})
}

func TestEveryDefaultErrorHandlerLogs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := jobs.Every(time.Second, func(ctx context.Context) error {
			return errors.New("upstream is down")
		}, jobs.WithName("price refresh"))
		logs := captureDefaultLog(t)
		require.NoError(t, j.Start(t.Context()))
		time.Sleep(time.Second + time.Millisecond)
		require.NoError(t, j.Stop(t.Context()))
		out := logs()
		assert.Contains(t, out, "level=ERROR")
		assert.Contains(t, out, `job="price refresh"`)
		assert.Contains(t, out, `err="upstream is down"`)
	})
}

func TestEveryCancellationAtStopIsNotReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started := make(chan struct{})
		var reported atomic.Int64
		j := jobs.Every(time.Second, func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		}, jobs.WithErrorHandler(func(context.Context, error) { reported.Add(1) }))
		require.NoError(t, j.Start(t.Context()))
		<-started
		require.NoError(t, j.Stop(t.Context()))
		assert.Zero(t, reported.Load())
	})
}

func TestEveryRunTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		j := jobs.Every(time.Minute, func(ctx context.Context) error {
			<-ctx.Done()
			_ = rec.run(ctx) // when the run ended
			return ctx.Err()
		}, jobs.WithRunTimeout(10*time.Second), jobs.WithErrorHandler(rec.handle))
		require.NoError(t, j.Start(t.Context()))
		time.Sleep(2*time.Minute + 11*time.Second)
		require.NoError(t, j.Stop(t.Context()))
		assert.Equal(t, []time.Duration{time.Minute + 10*time.Second, 2*time.Minute + 10*time.Second}, rec.runs())
		got := rec.errors()
		require.Len(t, got, 2)
		assert.ErrorIs(t, got[0], context.DeadlineExceeded)
	})
}

func TestEveryJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		j := jobs.Every(10*time.Second, rec.run, jobs.WithJitter(0.2), jobs.WithImmediate())
		require.NoError(t, j.Start(t.Context()))
		time.Sleep(10 * time.Minute)
		require.NoError(t, j.Stop(t.Context()))
		at := rec.runs()
		require.Greater(t, len(at), 40)
		distinct := map[time.Duration]bool{}
		for i := 1; i < len(at); i++ {
			d := at[i] - at[i-1]
			distinct[d] = true
			assert.GreaterOrEqual(t, d, 8*time.Second)
			assert.LessOrEqual(t, d, 12*time.Second)
		}
		assert.Greater(t, len(distinct), 10, "periods are not jittered")
	})
}

func TestEveryString(t *testing.T) {
	ok := func(context.Context) error { return nil }
	assert.Equal(t, "every 1m0s", jobs.Every(time.Minute, ok).String())
	assert.Equal(t, "prices", jobs.Every(time.Minute, ok, jobs.WithName("prices")).String())
}
