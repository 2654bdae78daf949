package decorator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// errNoTerm is reported when an Elector returns neither a term nor an error.
var errNoTerm = errors.New("the elector returned a nil term and no error")

// stopRequest is what Stop sends the gate: Stop's context, and the instant
// the stop timeout, counted from the call, passes.
type stopRequest struct {
	ctx      context.Context
	deadline time.Time
}

// gate is the goroutine of one campaign (one run): it campaigns, runs the
// inner job for each term won, and campaigns again until Stop. runCtx ends
// when Stop is called (after Stop's request was sent on r.stop); base has the
// values of the decorated Start's context and no cancellation.
func (d *decorated) gate(runCtx, base context.Context, r *run) {
	defer close(r.done)
	defer d.watchLeader(base)()
	bo := backoff{min: d.backoffMin, max: d.backoffMax}
	for runCtx.Err() == nil {
		term, err := d.campaign(runCtx, r)
		if runCtx.Err() != nil {
			if term != nil {
				// Won just as Stop arrived: give the lease back, start nothing.
				d.resign(base, r, term, stopRequestOf(r).ctx)
			}
			return
		}
		if err != nil {
			if term != nil { // an Elector that returned a term and an error
				d.resign(base, r, term, base)
			}
			d.report(base, r, fmt.Errorf("decorator: campaign for %s: %w", d.jobName, err))
			if !sleep(runCtx, bo.next()) {
				return
			}
			continue
		}
		if d.lead(runCtx, base, r, term, &bo) {
			return
		}
	}
}

// lead runs the inner job for one term, then ends the term. It returns true
// when Stop ended the run.
func (d *decorated) lead(runCtx, base context.Context, r *run, term elector.Term, bo *backoff) (stopped bool) {
	tctx := d.jobContext(base, term)
	var yield <-chan struct{}
	if y, ok := term.(elector.Yielder); ok {
		yield = y.Yield()
	}
	started, err := d.start(runCtx, tctx, r, term, yield)
	if err != nil {
		d.end(tctx, r, term, false, stopRequest{ctx: base}, err)
		return !sleep(runCtx, bo.next())
	}
	if started {
		bo.reset()
	}
	select {
	case <-term.Done():
		// Lost, expired, or ended by the start watchdog: stop the job with a
		// fresh context and campaign again at once.
		d.end(tctx, r, term, started, stopRequest{ctx: base, deadline: time.Now().Add(d.stopTimeout)}, nil)
		return false
	case <-yield:
		// The elector's Placer wants the lease on another replica: stop the
		// job while the term stays held, free the lease, and campaign again
		// (the Placer decides how long this replica holds back; a term that
		// yielded before the job started backs off as a failed start does,
		// so a Placer that yields every term at once cannot make it spin).
		d.handOff(tctx, r, term, started, stopRequest{ctx: base, deadline: time.Now().Add(d.stopTimeout)})
		return !started && !sleep(runCtx, bo.next())
	case req := <-r.stop:
		d.end(tctx, r, term, started, req, nil)
		return true
	}
}

// start runs OnElected and then, unless the term ended, was asked to yield
// or Stop arrived meanwhile, the inner Start. A watchdog bounds the two by the start timeout:
// when it passes, the watchdog resigns the term if the inner Start has not
// been called yet, or abandons it if the inner Start runs (the job may be
// starting), and reports what overran; the gate goes on once the call
// returns, and never starts the job for a term that has ended. started
// reports whether the inner Start returned nil; err is its error. An inner
// Start that overran is the job's Status overrun until it returns.
func (d *decorated) start(runCtx, tctx context.Context, r *run, term elector.Term, yield <-chan struct{}) (started bool, err error) {
	deadline := time.Now().Add(d.startTimeout)
	// claimed is set by whichever comes first: the gate about to call the
	// inner Start, or the watchdog finding OnElected still running.
	var claimed atomic.Bool
	r.watchdog.arm(deadline, func() {
		what := "inner Start"
		if claimed.CompareAndSwap(false, true) {
			what = "OnElected hook"
			d.resign(tctx, nil, term, tctx)
		} else {
			d.status.setOverran(what, d.startTimeout)
			d.abandon(tctx, nil, term)
		}
		d.report(tctx, nil, fmt.Errorf("decorator: %s of %s did not return within %v", what, d.jobName, d.startTimeout))
	})
	defer func() {
		if r.watchdog.disarm() {
			d.status.clearOverran()
		}
	}()
	d.elected(tctx, r, term)
	if runCtx.Err() != nil || isClosed(term.Done()) || isClosed(yield) || !claimed.CompareAndSwap(false, true) {
		return false, nil
	}
	ctx, cancel := context.WithDeadline(tctx, deadline)
	defer cancel()
	if err := d.callStart(ctx, r, term); err != nil {
		return false, fmt.Errorf("decorator: start %s: %w", d.jobName, err)
	}
	return true, nil
}

// end is the one way a term this replica led ends: it stops the inner job if
// it started (see stopJob), resigns the term (freeing the lease) unless the
// job may still run, reports failure (the inner Start's error) if any, and
// reports the demotion with failure (CauseStartFailed) or, if nil, the
// term's error as its cause.
func (d *decorated) end(tctx context.Context, r *run, term elector.Term, started bool, req stopRequest, failure error) {
	if !started || d.stopJob(tctx, r, term, req) {
		d.resign(tctx, r, term, req.ctx)
	}
	cause := term.Err()
	kind := elector.CauseOf(cause)
	if failure != nil {
		d.report(tctx, r, failure)
		cause, kind = failure, elector.CauseStartFailed
	}
	d.demoted(tctx, r, term, cause, kind)
}

// handOff ends a term its elector's Placer asked to yield, as end does,
// and reports the demotion as a handoff if the lease was freed.
func (d *decorated) handOff(tctx context.Context, r *run, term elector.Term, started bool, req stopRequest) {
	if started && !d.stopJob(tctx, r, term, req) {
		d.demoted(tctx, r, term, term.Err(), elector.CauseOf(term.Err()))
		return
	}
	d.resign(tctx, r, term, req.ctx)
	cause, kind := term.Err(), elector.CauseHandedOff
	if !errors.Is(cause, elector.ErrResigned) {
		kind = elector.CauseOf(cause) // it ended some other way first
	}
	d.demoted(tctx, r, term, cause, kind)
}

// stopJob stops the inner job while the term stays held (renewing): first
// with req.ctx plus the term, bounded by req.deadline; if that fails while
// time is left, once more with that context's values only, until
// req.deadline. It returns true if the inner Stop returned nil in time.
// Otherwise it has abandoned the term and reported why: a watchdog does so at
// req.deadline if the inner Stop has not returned, and the gate stays in the
// inner Stop until it does: meanwhile, that is the job's Status overrun.
func (d *decorated) stopJob(tctx context.Context, r *run, term elector.Term, req stopRequest) bool {
	r.watchdog.arm(req.deadline, func() {
		d.status.setOverran("inner Stop", d.stopTimeout)
		d.abandon(tctx, nil, term)
		d.report(tctx, nil, fmt.Errorf("decorator: inner Stop of %s has not returned after %v; its lease is left to run out", d.jobName, d.stopTimeout))
	})
	ctx, cancel := context.WithDeadline(d.jobContext(req.ctx, term), req.deadline)
	defer cancel()
	err := d.callStop(ctx, r, term)
	if err != nil && time.Now().Before(req.deadline) {
		retry, cancel := context.WithDeadline(context.WithoutCancel(ctx), req.deadline)
		err = d.callStop(retry, r, term)
		cancel()
	}
	if r.watchdog.disarm() {
		d.status.clearOverran()
		return false
	}
	if err != nil {
		d.abandon(tctx, r, term)
		d.report(tctx, r, fmt.Errorf("decorator: inner Stop of %s: %w; its lease is left to run out", d.jobName, err))
		return false
	}
	return true
}

// watchdog calls the function it was armed with on a goroutine of its own
// when the deadline passes, unless disarm is called first: the start and the
// stop watchdog of a run, armed one at a time by the gate. Its one timer is
// made at the first arm, on the gate's goroutine (so a synctest bubble's
// clock drives it), and reset for every later one: arming costs no
// goroutine, and none runs unless a deadline passes.
type watchdog struct {
	timer *time.Timer
	fired chan struct{} // f has returned; buffered 1, one send per firing

	mu sync.Mutex // orders arm's write of f before the timer's read
	f  func()
}

// arm calls f on a goroutine of its own when deadline passes. Every arm must
// be followed by a disarm before the next one.
func (w *watchdog) arm(deadline time.Time, f func()) {
	w.mu.Lock()
	w.f = f
	w.mu.Unlock()
	if w.timer == nil {
		w.fired = make(chan struct{}, 1)
		w.timer = time.AfterFunc(time.Until(deadline), w.fire)
		return
	}
	w.timer.Reset(time.Until(deadline))
}

func (w *watchdog) fire() {
	w.mu.Lock()
	f := w.f
	w.mu.Unlock()
	f()
	w.fired <- struct{}{}
}

// disarm keeps the armed function from being called, or waits for it to
// return if it has begun, and reports whether it ran.
func (w *watchdog) disarm() (ran bool) {
	if w.timer.Stop() {
		return false
	}
	<-w.fired
	return true
}

// campaign calls the elector under recover.
func (d *decorated) campaign(ctx context.Context, r *run) (t elector.Term, err error) {
	r.step(stepCampaign)
	err = protect("Campaign", func() (err error) {
		t, err = d.elector.Campaign(ctx)
		return err
	})
	if err == nil && t == nil {
		return nil, errNoTerm
	}
	return t, err
}

// resign resigns term with the values of parent, not its cancellation, and
// the stop timeout, reporting an error or panic to logCtx.
func (d *decorated) resign(logCtx context.Context, r *run, term elector.Term, parent context.Context) {
	r.step(stepResign)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), d.stopTimeout)
	defer cancel()
	if err := protect("Resign", func() error { return term.Resign(ctx) }); err != nil {
		d.report(logCtx, r, fmt.Errorf("decorator: resign %s: %w", d.jobName, err))
	}
}

// abandon ends term without freeing its lease, which runs out in the store,
// reporting a panic to logCtx.
func (d *decorated) abandon(logCtx context.Context, r *run, term elector.Term) {
	r.step(stepAbandon)
	if err := protect("Abandon", func() error { term.Abandon(); return nil }); err != nil {
		d.report(logCtx, r, fmt.Errorf("decorator: abandon %s: %w", d.jobName, err))
	}
}

// jobContext returns parent with term and the observer: the values the
// inner job's contexts carry.
func (d *decorated) jobContext(parent context.Context, term elector.Term) context.Context {
	return elector.ContextWithObserver(elector.ContextWithTerm(parent, term), d.observer)
}

// callStart runs the inner Start, turning a panic into a *PanicError, and
// reports it (EventJobStart).
func (d *decorated) callStart(ctx context.Context, r *run, term elector.Term) error {
	r.step(stepStart)
	begin := d.callBegin()
	err := protect("Start", func() error { return d.inner.Start(ctx) })
	d.observeCall(elector.EventJobStart, term, begin, err)
	return err
}

// callStop runs the inner Stop, turning a panic into a *PanicError, and
// reports it (EventJobStop).
func (d *decorated) callStop(ctx context.Context, r *run, term elector.Term) error {
	r.step(stepStop)
	begin := d.callBegin()
	err := protect("Stop", func() error { return d.inner.Stop(ctx) })
	d.observeCall(elector.EventJobStop, term, begin, err)
	return err
}

// stopRequestOf returns the request Stop sent, which is there whenever the
// run's context has ended.
func stopRequestOf(r *run) stopRequest {
	select {
	case req := <-r.stop:
		return req
	default:
		return stopRequest{ctx: context.Background()}
	}
}
