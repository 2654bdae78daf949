package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"
)

// EveryJob runs a function periodically between Start and Stop. It has the
// Start(ctx) error / Stop(ctx) error shape of decorator.Job. Create it with
// [Every]; the zero value is not usable.
//
// Callers may rely on this:
//
//   - Between Start and Stop exactly one goroutine runs the function, so runs
//     never overlap.
//   - The function gets the job's run context: it carries the values of the
//     context given to Start (such as the leader term) but not its deadline or
//     cancellation, and it ends when Stop is called (or when a
//     [WithRunTimeout] bound passes).
//   - Runs start one interval apart, measured from start to start. A run that
//     takes longer than the interval is followed at once by the next one;
//     missed periods are skipped, not queued (like [time.Ticker]).
//   - Start, Stop and Start again work any number of times; Start and Stop
//     are safe for concurrent use.
//   - Panics in the function are recovered and reported as *[PanicError].
type EveryJob struct {
	interval time.Duration
	fn       func(context.Context) error
	cfg      everyConfig

	mu     sync.Mutex
	cancel context.CancelFunc // non-nil between Start and Stop
	done   chan struct{}      // closed when the last launched goroutine exits; nil before the first Start
}

// Every returns a job that calls fn every interval between Start and Stop.
// It never panics: a non-positive interval, a nil fn or a bad option makes
// every Start return an error naming the bad value.
func Every(interval time.Duration, fn func(ctx context.Context) error, opts ...EveryOption) *EveryJob {
	j := &EveryJob{interval: interval, fn: fn}
	j.cfg.name = fmt.Sprintf("every %v", interval)
	for _, o := range opts {
		if o != nil {
			o.apply(&j.cfg)
		}
	}
	if interval <= 0 {
		j.cfg.fail(fmt.Errorf("jobs: Every(%v): interval must be positive", interval))
	}
	if fn == nil {
		j.cfg.fail(fmt.Errorf("jobs: Every(%v): nil function", interval))
	}
	return j
}

// String returns the job's name (see [WithName]).
func (j *EveryJob) String() string { return j.cfg.name }

// Start launches the job's goroutine and returns at once. The first run
// begins one interval later, or right away with [WithImmediate].
//
// Start returns an error and launches nothing if the job was built with bad
// input, if ctx has ended, or if the job runs already (an error wrapping
// [ErrAlreadyStarted]: a second Start would otherwise silently keep the
// first Start's context values, such as an older leader term). If a
// previous Stop returned before the goroutine exited, Start first waits for
// it, bounded by ctx, so runs never overlap across restarts.
func (j *EveryJob) Start(ctx context.Context) error {
	if j.cfg.err != nil {
		return j.cfg.err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("jobs: start %s: %w", j.cfg.name, err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cancel != nil {
		return fmt.Errorf("jobs: start %s: %w", j.cfg.name, ErrAlreadyStarted)
	}
	if j.done != nil {
		select {
		case <-j.done:
		case <-ctx.Done():
			return fmt.Errorf("jobs: start %s: previous run still stopping: %w", j.cfg.name, ctx.Err())
		}
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	j.cancel, j.done = cancel, done
	go j.loop(runCtx, done)
	return nil
}

// Stop cancels the run context and waits until the goroutine has exited,
// which includes waiting for a run in progress to return. If ctx ends first,
// Stop returns an error wrapping ctx.Err(); the goroutine still exits as
// soon as the function returns, and a later Stop or Start waits for that.
// Stop of a job that is not running returns nil.
func (j *EveryJob) Stop(ctx context.Context) error {
	j.mu.Lock()
	cancel, done := j.cancel, j.done
	j.cancel = nil
	j.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("jobs: stop %s: run still in progress: %w", j.cfg.name, ctx.Err())
	}
}

// loop is the job's goroutine: it runs fn on schedule until ctx ends.
func (j *EveryJob) loop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	next := time.Now()
	if !j.cfg.immediate {
		next = next.Add(j.period())
	}
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		start := time.Now()
		j.run(ctx)
		if ctx.Err() != nil {
			return
		}
		timer.Reset(time.Until(start.Add(j.period())))
	}
}

// period is the interval with jitter applied.
func (j *EveryJob) period() time.Duration {
	if j.cfg.jitter == 0 {
		return j.interval
	}
	f := 1 + j.cfg.jitter*(2*rand.Float64()-1)
	return time.Duration(float64(j.interval) * f)
}

// run calls fn once and reports its error, unless the error only says that
// the job was stopped.
func (j *EveryJob) run(ctx context.Context) {
	rctx := ctx
	if j.cfg.runTimeout > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, j.cfg.runTimeout)
		defer cancel()
	}
	err := j.call(rctx)
	if err == nil {
		return
	}
	var pe *PanicError
	if ctx.Err() != nil && errors.Is(err, context.Canceled) && !errors.As(err, &pe) {
		return // stopped: the function saw its context end
	}
	j.report(ctx, err)
}

func (j *EveryJob) call(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return j.fn(ctx)
}

// report gives err to the error handler; a panicking handler is logged.
func (j *EveryJob) report(ctx context.Context, err error) {
	defer func() {
		if r := recover(); r != nil {
			slog.Default().ErrorContext(ctx, "jobs: error handler panicked",
				"job", j.cfg.name, "panic", r, "err", err)
		}
	}()
	if j.cfg.onError != nil {
		j.cfg.onError(ctx, err)
		return
	}
	slog.Default().ErrorContext(ctx, "jobs: run failed", "job", j.cfg.name, "err", err)
}
