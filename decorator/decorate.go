package decorator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/decoratable"
)

// Decorate returns j as a leader job: a job of the same type J whose Start
// campaigns with e and starts j (wrapped in the [WithMiddleware] chain) only
// while this replica holds a term, and whose Stop stops j, frees the lease
// once j has stopped, and ends the campaign. See the package documentation
// for the full lifecycle. A j with a Name() string method is shown by that
// name in logs, errors and status; any other j by its Go type.
//
// Everything is built once, here: the middleware chain, the composed hooks
// and the options. Start/Stop cycles never add layers, goroutines or hooks,
// and Decorate changes nothing it is given.
//
// J must be an interface type whose methods a decorated job has (Start,
// Stop, Unwrap() Job, String() string), such as [Job], or any interface with
// only Start and Stop; otherwise Decorate panics, saying why. A nil j or e,
// or a bad option value, does not panic: the returned job's Start returns an
// error naming it. A j or e that is a nil pointer in a non-nil interface is
// not detected: the first call on it panics, and the panic is recovered and
// reported like any other (see [Hooks]).
func Decorate[J Job](j J, e elector.Elector, opts ...Option) J {
	if err := decoratable.Check[J](); err != nil {
		panic(err)
	}
	return any(newDecorated(j, e, opts)).(J)
}

// A decorated job has the methods that decoratable.Check allows J to have,
// and those of Status, which StatusOf reaches whatever J is.
var _ interface {
	Job
	Unwrap() Job
	fmt.Stringer
	Status
} = (*decorated)(nil)

// newDecorated builds the immutable part of a decorated job.
func newDecorated(j Job, e elector.Elector, opts []Option) *decorated {
	cfg := newConfig(opts)
	d := &decorated{
		jobName:      nameOf(j),
		elector:      e,
		hooks:        composeHooks(cfg.hooks),
		log:          cfg.logger,
		startTimeout: cfg.startTimeout,
		stopTimeout:  cfg.stopTimeout,
		backoffMin:   cfg.backoffMin,
		backoffMax:   cfg.backoffMax,
		observer:     cfg.observer,
	}
	errs := cfg.errs
	if j == nil {
		errs = append(errs, errors.New("decorator: the job is nil"))
	} else if d.inner = NewChain(cfg.mws...).Then(j); d.inner == nil {
		errs = append(errs, fmt.Errorf("decorator: the middleware chain returned a nil job for %s", d.jobName))
	}
	if e == nil {
		errs = append(errs, fmt.Errorf("decorator: the elector of %s is nil", d.jobName))
	}
	d.err = errors.Join(errs...)
	return d
}

// decorated is the job Decorate returns. Everything but mu, cur, last and
// status is fixed at construction.
type decorated struct {
	inner        Job // the middleware-wrapped job
	elector      elector.Elector
	hooks        hookSet
	log          *slog.Logger
	startTimeout time.Duration
	stopTimeout  time.Duration
	backoffMin   time.Duration
	backoffMax   time.Duration
	observer     elector.Observer // nil if none
	jobName      string           // nameOf the job given to Decorate
	err          error            // bad input: Start returns it

	status status // what the Status methods read

	mu   sync.Mutex
	cur  *run // the running campaign; nil when stopped
	last *run // the latest campaign, which may still be finishing
}

// run is one Start..Stop campaign: one gate goroutine.
type run struct {
	cancel context.CancelFunc // ends the campaign; called by Stop after it sent on stop
	stop   chan stopRequest   // from Stop; buffered 1, sent once
	done   chan struct{}      // closed when the gate goroutine exits
	busy   atomic.Uint32      // the step the gate waits for; see run.step

	watchdog watchdog // the gate's start and stop watchdog
}

// A step is a call the gate waits for, which Stop names if the run has not
// ended within the stop timeout.
type step uint32

const (
	stepNone step = iota
	stepCampaign
	stepResign
	stepAbandon
	stepStart
	stepStop
	stepOnElected
	stepOnDemoted
	stepOnError
	stepOnNewLeader
)

var stepNames = [...]string{
	stepNone:        "the campaign",
	stepCampaign:    "Campaign of the elector",
	stepResign:      "Resign of the term",
	stepAbandon:     "Abandon of the term",
	stepStart:       "inner Start",
	stepStop:        "inner Stop",
	stepOnElected:   "OnElected hook",
	stepOnDemoted:   "OnDemoted hook",
	stepOnError:     "OnError hook",
	stepOnNewLeader: "OnNewLeader hook",
}

func (s step) String() string { return stepNames[s] }

// step records what the gate is about to wait for. Watchdogs pass a nil r:
// they record nothing.
func (r *run) step(s step) {
	if r != nil {
		r.busy.Store(uint32(s))
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
// a campaign still finishing, and otherwise returns nil at once.
func (d *decorated) Stop(ctx context.Context) error {
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
		return fmt.Errorf("%v has not returned after %v", step(r.busy.Load()), d.stopTimeout)
	}
}

// Unwrap returns the inner job wrapped in the middleware chain.
func (d *decorated) Unwrap() Job { return d.inner }

// String names the decorated job and its lease, e.g.
// `leader job *jobs.Prices (lease "prices")`.
func (d *decorated) String() string {
	if n := d.leaseName(); n != "" {
		return fmt.Sprintf("leader job %s (lease %q)", d.jobName, n)
	}
	return "leader job " + d.jobName
}

// nameOf is j's display name: its Name() if it has one that is not empty,
// else its Go type.
func nameOf(j Job) string {
	if n, ok := j.(interface{ Name() string }); ok && n.Name() != "" {
		return n.Name()
	}
	return fmt.Sprintf("%T", j)
}
