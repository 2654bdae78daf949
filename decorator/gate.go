package decorator

import (
	"context"
	"errors"
	"fmt"

	"github.com/leaderaware/leaderaware/elector"
)

// errNoTerm is reported when an Elector returns neither a term nor an error.
var errNoTerm = errors.New("the elector returned a nil term and no error")

// gate is the goroutine of one campaign (one run): it campaigns, runs the
// inner job for each term won, and campaigns again until Stop. runCtx ends
// when Stop is called (after Stop's context was sent on r.stop); base has the
// values of the decorated Start's context and no cancellation.
func (d *decorated) gate(runCtx, base context.Context, r *run) {
	defer close(r.done)
	bo := backoff{min: d.backoffMin, max: d.backoffMax}
	for runCtx.Err() == nil {
		term, err := d.campaign(runCtx)
		if runCtx.Err() != nil {
			if term != nil {
				// Won just as Stop arrived: give the lease back, start nothing.
				d.resign(base, term, stopContext(r))
			}
			return
		}
		if err != nil {
			if !isNil(term) { // an Elector that returned a term and an error
				d.resign(base, term, base)
			}
			d.report(base, fmt.Errorf("decorator: campaign for %s: %w", d.jobName, err))
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

// lead runs the inner job for one term. It returns true when Stop ended the
// run.
func (d *decorated) lead(runCtx, base context.Context, r *run, term elector.Term, bo *backoff) (stopped bool) {
	tctx := elector.ContextWithTerm(base, term)
	d.elected(tctx, term)
	select {
	case <-term.Done():
		// The term ended while OnElected ran: never start a job without a
		// lease.
		d.resign(tctx, term, base)
		d.demoted(tctx, term, term.Err())
		return false
	case sctx := <-r.stop:
		// Stop arrived while OnElected ran: the job never starts.
		d.resign(tctx, term, sctx)
		d.demoted(tctx, term, elector.ErrResigned)
		return true
	default:
	}
	sctx, cancel := context.WithTimeout(tctx, d.startTimeout)
	err := callStart(sctx, d.inner)
	cancel()
	if err != nil {
		err = fmt.Errorf("decorator: start %s: %w", d.jobName, err)
		d.report(tctx, err)
		d.resign(tctx, term, base)
		d.demoted(tctx, term, err)
		return !sleep(runCtx, bo.next())
	}
	bo.reset()
	select {
	case <-term.Done():
		// Lost or expired: stop the job with a fresh context, free the lease
		// if it is still ours, and campaign again at once.
		ctx, cancel := context.WithTimeout(tctx, d.stopTimeout)
		if err := callStop(ctx, d.inner); err != nil {
			d.report(tctx, fmt.Errorf("decorator: stop %s: %w", d.jobName, err))
		}
		cancel()
		d.resign(tctx, term, base)
		d.demoted(tctx, term, term.Err())
		return false
	case sctx := <-r.stop:
		// Stop: the inner job stops with the caller's context; the lease is
		// freed only after its Stop returned.
		if err := callStop(elector.ContextWithTerm(sctx, term), d.inner); err != nil {
			d.report(tctx, fmt.Errorf("decorator: stop %s: %w", d.jobName, err))
		}
		d.resign(tctx, term, sctx)
		d.demoted(tctx, term, elector.ErrResigned)
		return true
	}
}

// campaign calls the elector under recover.
func (d *decorated) campaign(ctx context.Context) (t elector.Term, err error) {
	defer func() {
		if v := recover(); v != nil {
			t, err = nil, newPanicError("Campaign", v)
		}
	}()
	t, err = d.elector.Campaign(ctx)
	if err == nil && isNil(t) {
		return nil, errNoTerm
	}
	return t, err
}

// resign resigns term with the values of parent, not its cancellation, and
// the stop timeout, reporting an error or panic to logCtx.
func (d *decorated) resign(logCtx context.Context, term elector.Term, parent context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), d.stopTimeout)
	defer cancel()
	err := func() (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = newPanicError("Resign", v)
			}
		}()
		return term.Resign(ctx)
	}()
	if err != nil {
		d.report(logCtx, fmt.Errorf("decorator: resign %s: %w", d.jobName, err))
	}
}

// stopContext returns the context Stop sent, which is there whenever the
// run's context has ended.
func stopContext(r *run) context.Context {
	select {
	case ctx := <-r.stop:
		return ctx
	default:
		return context.Background()
	}
}

// callStart runs j.Start, turning a panic into a *PanicError.
func callStart(ctx context.Context, j Job) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = newPanicError("Start", v)
		}
	}()
	return j.Start(ctx)
}

// callStop runs j.Stop, turning a panic into a *PanicError.
func callStop(ctx context.Context, j Job) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = newPanicError("Stop", v)
		}
	}()
	return j.Stop(ctx)
}
