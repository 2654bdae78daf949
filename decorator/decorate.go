package decorator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// Decorate returns j as a leader job: a job of the same type J whose Start
// campaigns with e and starts j (wrapped in the [WithMiddleware] chain) only
// while this replica holds a term, and whose Stop stops j, frees the lease
// once j has stopped, and ends the campaign. See the package documentation
// for the full lifecycle.
//
// Everything is built once, here: the middleware chain, the composed hooks
// and the options. Start/Stop cycles never add layers, goroutines or hooks,
// and Decorate changes nothing it is given.
//
// J must be an interface type whose methods a decorated job has (Start,
// Stop, Unwrap() Job, String() string), such as [Job], or any interface with
// only Start and Stop; otherwise Decorate panics with the reason
// [CanDecorate] returns. A nil j or e, or a bad option value, does not panic:
// the returned job's Start returns an error naming it.
func Decorate[J Job](j J, e elector.Elector, opts ...Option) J {
	if err := CanDecorate[J](); err != nil {
		panic(err)
	}
	return any(newDecorated(j, e, opts)).(J)
}

// newDecorated builds the immutable part of a decorated job.
func newDecorated(j Job, e elector.Elector, opts []Option) *decorated {
	cfg := newConfig(opts)
	errs := cfg.errs
	d := &decorated{
		jobName:      fmt.Sprintf("%T", j),
		elector:      e,
		hooks:        composeHooks(cfg.hooks),
		log:          cfg.logger,
		startTimeout: cfg.startTimeout,
		stopTimeout:  cfg.stopTimeout,
		backoffMin:   cfg.backoffMin,
		backoffMax:   cfg.backoffMax,
	}
	if n, ok := e.(interface{ Name() string }); ok && !isNil(e) {
		d.lease = n.Name()
	}
	switch {
	case isNil(j):
		errs = append(errs, fmt.Errorf("decorator: the job is nil (%s)", d.jobName))
	default:
		d.inner = NewChain(cfg.mws...).Then(j)
		if isNil(d.inner) {
			errs = append(errs, fmt.Errorf("decorator: the middleware chain returned a nil job for %s", d.jobName))
		}
	}
	if isNil(e) {
		errs = append(errs, fmt.Errorf("decorator: the elector of %s is nil (%T)", d.jobName, e))
	}
	d.err = errors.Join(errs...)
	return d
}

// isNil reports whether v is nil or a nil pointer, map, func, chan, slice or
// interface inside an interface.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}

// decorated is the job Decorate returns. Everything but mu, cur and last is
// fixed at construction.
type decorated struct {
	inner        Job // the middleware-wrapped job
	elector      elector.Elector
	hooks        hookSet
	log          *slog.Logger
	startTimeout time.Duration
	stopTimeout  time.Duration
	backoffMin   time.Duration
	backoffMax   time.Duration
	jobName      string // %T of the job given to Decorate
	lease        string // the elector's lease name, if it tells
	err          error  // bad input: Start returns it

	mu   sync.Mutex
	cur  *run // the running campaign; nil when stopped
	last *run // the latest campaign, which may still be finishing
}

// run is one Start..Stop campaign: one gate goroutine.
type run struct {
	cancel context.CancelFunc     // ends the campaign; called by Stop after it sent on stop
	stop   chan stopRequest       // from Stop; buffered 1, sent once
	done   chan struct{}          // closed when the gate goroutine exits
	busy   atomic.Pointer[string] // what the gate waits for; see step
}

// step records what the gate is about to wait for, which Stop names if the
// run has not ended within the stop timeout. Watchdogs pass a nil r: they
// record nothing.
func (r *run) step(what string) {
	if r != nil {
		r.busy.Store(&what)
	}
}

// Start launches the campaign on one goroutine and returns nil at once. The
// inner job starts when a term is won. Start on a started job does nothing
// and returns nil. If the previous campaign is still finishing (its Stop
// returned early), Start first waits for it, so two inner jobs never run at
// once and restarts never pile up goroutines; if ctx ends or the stop
// timeout passes first, Start returns an error (wrapping ctx's, or naming
// what the previous campaign waits for) and starts nothing. Start returns an
// error, and starts nothing, if Decorate got a nil job, a nil elector or a
// bad option value.
func (d *decorated) Start(ctx context.Context) error {
	if d.err != nil {
		return d.err
	}
	if ctx == nil {
		return fmt.Errorf("decorator: Start of %s: nil context", d.jobName)
	}
	for {
		d.mu.Lock()
		if d.cur != nil {
			d.mu.Unlock()
			return nil
		}
		last := d.last
		if last == nil || isClosed(last.done) {
			base := context.WithoutCancel(ctx)
			runCtx, cancel := context.WithCancel(base)
			r := &run{cancel: cancel, stop: make(chan stopRequest, 1), done: make(chan struct{})}
			d.cur, d.last = r, r
			d.mu.Unlock()
			go d.gate(runCtx, base, r)
			return nil
		}
		d.mu.Unlock()
		if err := d.wait(ctx, last); err != nil {
			return fmt.Errorf("decorator: start %s: the previous run is still stopping: %w", d.jobName, err)
		}
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Stop ends the campaign: it stops the inner job if it runs and settles the
// term, as the package documentation describes (Lifecycle). It returns nil
// once the campaign has ended. It returns earlier if ctx ends, with an error
// wrapping ctx's, or once the stop timeout has passed, with an error naming
// what the campaign waits for (such as the inner Stop or a hook); the
// campaign then finishes on its own. Stop on a stopped job waits likewise for
// a campaign still finishing, and otherwise returns nil at once. A nil ctx is
// taken as [context.Background].
func (d *decorated) Stop(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	d.mu.Lock()
	r, last := d.cur, d.last
	if r != nil {
		d.cur = nil
		r.stop <- stopRequest{ctx: ctx, deadline: time.Now().Add(d.stopTimeout)} // never blocks: one send per run, buffer 1
		r.cancel()
	}
	d.mu.Unlock()
	if last == nil {
		return nil
	}
	if err := d.wait(ctx, last); err != nil {
		return fmt.Errorf("decorator: stop %s: %w", d.jobName, err)
	}
	return nil
}

// wait waits for run r to end. It returns nil once it has, ctx's error if ctx
// ends first, and an error naming what r waits for if the stop timeout passes
// first.
func (d *decorated) wait(ctx context.Context, r *run) error {
	if isClosed(r.done) {
		return nil
	}
	timer := time.NewTimer(d.stopTimeout)
	defer timer.Stop()
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		what := "the campaign"
		if p := r.busy.Load(); p != nil {
			what = *p
		}
		return fmt.Errorf("%s has not returned after %v", what, d.stopTimeout)
	}
}

// Unwrap returns the inner job wrapped in the middleware chain.
func (d *decorated) Unwrap() Job { return d.inner }

// String names the decorated job and its lease, e.g.
// `leader job *jobs.Prices (lease "prices")`.
func (d *decorated) String() string {
	if d.lease == "" {
		return "leader job " + d.jobName
	}
	return fmt.Sprintf("leader job %s (lease %q)", d.jobName, d.lease)
}
