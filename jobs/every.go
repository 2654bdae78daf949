package jobs

import (
	"context"
	"fmt"
	"math/rand/v2"
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
//   - Panics in the function are recovered and reported as *[decorator.PanicError].
type EveryJob struct {
	interval time.Duration
	fn       func(context.Context) error
	cfg      config
	g        lifecycle
	last     lastRun
}

// Every returns a job that calls fn every interval between Start and Stop.
// It never panics: a non-positive interval, a nil fn or a bad option makes
// every Start return an error naming the bad value.
func Every(interval time.Duration, fn func(ctx context.Context) error, opts ...EveryOption) *EveryJob {
	j := &EveryJob{interval: interval, fn: fn}
	j.cfg.name = fmt.Sprintf("every %v", interval)
	for _, o := range opts {
		if o != nil {
			o.applyEvery(&j.cfg)
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

// Name returns the job's name, by which [decorator.Decorate] shows it.
func (j *EveryJob) Name() string { return j.cfg.name }

// LastRun returns what the job's function last did, for status pages.
func (j *EveryJob) LastRun() RunReport { return j.last.get() }

// Start launches the job's goroutine and returns at once. The first run
// begins one interval later, or right away with [WithImmediate].
//
// Start returns an error and launches nothing if the job was built with bad
// input, if ctx has ended, or if the job runs already (an error wrapping
// [ErrAlreadyStarted]: a second Start would otherwise silently keep the
// first Start's context values, such as an older leader term). If a
// previous Stop returned before the goroutine exited, Start first waits for
// it, bounded by ctx, so runs never overlap across restarts.
func (j *EveryJob) Start(ctx context.Context) error { return j.g.start(ctx, &j.cfg, j.loop) }

// Stop cancels the run context and waits until the goroutine has exited,
// which includes waiting for a run in progress to return. If ctx ends first,
// Stop returns an error wrapping ctx.Err(); the goroutine still exits as
// soon as the function returns, and a later Stop or Start waits for that.
// Stop of a job that is not running returns nil.
func (j *EveryJob) Stop(ctx context.Context) error { return j.g.stop(ctx, &j.cfg) }

// loop is the job's goroutine: it runs fn on schedule until ctx ends.
func (j *EveryJob) loop(ctx context.Context) error {
	next := time.Now()
	if !j.cfg.immediate {
		next = next.Add(j.period())
	}
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		start := time.Now()
		j.run(ctx)
		if ctx.Err() != nil {
			return nil
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
	j.last.begin()
	err := call(rctx, j.cfg.name, j.fn)
	if stopped(ctx, err) {
		err = nil
	}
	j.last.end(err)
	if err != nil {
		j.cfg.report(ctx, err)
	}
}
