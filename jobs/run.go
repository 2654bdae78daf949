package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/leaderaware/leaderaware/decorator"
)

// Run returns a job that runs fn once per Start, on one goroutine, until
// Stop: a worker loop, such as a queue consumer. Callers may rely on this:
//
//   - Start launches fn and returns at once. fn's context has the values of
//     Start's context (decorated: the leader term, see
//     elector.LeaseFromContext) but not its deadline or cancellation; it
//     ends when Stop is called (decorated: when the term ends).
//   - Stop cancels fn's context and waits for fn to return; if ctx ends
//     first, Stop returns an error wrapping ctx's, and a later Stop or Start
//     waits for fn again.
//   - Stop returns fn's error, or a *[decorator.PanicError] (Method: the
//     job's name) if fn panicked, but not an error that only says that Stop
//     ended fn's context; so does every Stop until the next Start. With [WithErrorHandler], the handler gets the
//     error as soon as fn returns instead, and Stop returns nil.
//   - Start on a started job, even one whose fn has returned, returns an
//     error wrapping [ErrAlreadyStarted]. Start, Stop and Start again work
//     any number of times, and are safe for concurrent use.
//
// fn should return only when its context ends. If it returns earlier,
// nothing runs until Stop and Start, while a decorated job keeps its lease:
// report such errors with [WithErrorHandler]. Decorated, an error from Stop
// is reported, and the lease left to run out rather than freed. A nil fn or
// a bad option makes every Start return an error naming it.
//
// The job has the method LastRun() [RunReport], as [EveryJob] has, for
// status pages: reach it with a type assertion.
func Run(fn func(ctx context.Context) error, opts ...RunOption) decorator.Job {
	j := &runJob{fn: fn}
	j.cfg.name = "run"
	for _, o := range opts {
		if o != nil {
			o.applyRun(&j.cfg)
		}
	}
	if fn == nil {
		j.cfg.fail(fmt.Errorf("jobs: %s: nil function", j.cfg.name))
	}
	return j
}

type runJob struct {
	fn   func(context.Context) error
	cfg  config
	g    lifecycle
	last lastRun
}

func (j *runJob) Start(ctx context.Context) error { return j.g.start(ctx, &j.cfg, j.run) }
func (j *runJob) Stop(ctx context.Context) error  { return j.g.stop(ctx, &j.cfg) }

// Name is the job's name, by which the decorator shows it.
func (j *runJob) Name() string { return j.cfg.name }

// LastRun returns what fn last did: its start, its end and its last error.
func (j *runJob) LastRun() RunReport { return j.last.get() }

// run calls fn once and returns its error, unless the error only says that
// the job was stopped or it went to the error handler.
func (j *runJob) run(ctx context.Context) error {
	j.last.begin()
	err := call(ctx, j.cfg.name, j.fn)
	if stopped(ctx, err) {
		err = nil
	}
	j.last.end(err)
	if err == nil {
		return nil
	}
	if j.cfg.onError != nil {
		j.cfg.report(ctx, err)
		return nil
	}
	return err
}

// RunReport is what the function of a job of [Every] or [Run] last did.
// Errors that only say that Stop ended the function are not errors here.
type RunReport struct {
	Started time.Time // when the last run began; zero before the first
	Ended   time.Time // when the last run returned; zero while it runs
	Err     error     // the last error a run returned, kept until the next one; nil if none has failed
	ErrAt   time.Time // when the run that returned Err ended
}

// lastRun records the RunReport of a job; its methods are safe for
// concurrent use.
type lastRun struct {
	mu sync.Mutex
	r  RunReport
}

func (l *lastRun) begin() {
	l.mu.Lock()
	l.r.Started, l.r.Ended = time.Now(), time.Time{}
	l.mu.Unlock()
}

// end records that the run that began last returned err (nil for none).
func (l *lastRun) end(err error) {
	l.mu.Lock()
	l.r.Ended = time.Now()
	if err != nil {
		l.r.Err, l.r.ErrAt = err, l.r.Ended
	}
	l.mu.Unlock()
}

func (l *lastRun) get() RunReport {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r
}

// lifecycle runs a function on one goroutine between start and stop, again
// after each stop: what EveryJob and Run share.
type lifecycle struct {
	mu   sync.Mutex
	cur  *launch // between start and stop
	last *launch // the latest one, which may still be running
}

// launch is one run of a lifecycle's function.
type launch struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the function has returned
	err    error         // what it returned; set before done is closed
}

// start launches body on a goroutine with a context that has ctx's values
// and ends at stop, unless cfg holds bad input. It first waits, bounded by
// ctx, for a launch that a stop did not see end.
func (g *lifecycle) start(ctx context.Context, cfg *config, body func(context.Context) error) error {
	if cfg.err != nil {
		return cfg.err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("jobs: start %s: %w", cfg.name, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cur != nil {
		return fmt.Errorf("jobs: start %s: %w", cfg.name, ErrAlreadyStarted)
	}
	if g.last != nil {
		select {
		case <-g.last.done:
		case <-ctx.Done():
			return fmt.Errorf("jobs: start %s: previous run still stopping: %w", cfg.name, ctx.Err())
		}
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &launch{cancel: cancel, done: make(chan struct{})}
	g.cur, g.last = l, l
	go func() {
		defer close(l.done)
		l.err = body(runCtx)
	}()
	return nil
}

// stop ends the context of the latest launch and waits, bounded by ctx, for
// it to return; it returns what the body returned.
func (g *lifecycle) stop(ctx context.Context, cfg *config) error {
	g.mu.Lock()
	l := g.last
	if g.cur != nil {
		g.cur.cancel()
		g.cur = nil
	}
	g.mu.Unlock()
	if l == nil {
		return nil
	}
	select {
	case <-l.done:
		return l.err
	case <-ctx.Done():
		return fmt.Errorf("jobs: stop %s: run still in progress: %w", cfg.name, ctx.Err())
	}
}

// call calls fn, turning a panic into a *decorator.PanicError of the job
// name.
func call(ctx context.Context, name string, fn func(context.Context) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &decorator.PanicError{Method: name, Value: v, Stack: debug.Stack()}
		}
	}()
	return fn(ctx)
}

// stopped reports whether err only says that ctx, the job's run context,
// ended because the job was stopped.
func stopped(ctx context.Context, err error) bool {
	var pe *decorator.PanicError
	return ctx.Err() != nil && errors.Is(err, context.Canceled) && !errors.As(err, &pe)
}

// report gives err to the error handler, or logs it without one; a
// panicking handler is logged.
func (c *config) report(ctx context.Context, err error) {
	defer func() {
		if v := recover(); v != nil {
			slog.Default().ErrorContext(ctx, "jobs: error handler panicked",
				"job", c.name, "panic", v, "err", err)
		}
	}()
	if c.onError != nil {
		c.onError(ctx, err)
		return
	}
	slog.Default().ErrorContext(ctx, "jobs: run failed", "job", c.name, "err", err)
}
