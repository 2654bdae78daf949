package decorator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// Hooks are called by a decorated job on its leadership transitions. Every
// OnElected is followed by exactly one OnDemoted. Hooks run on the decorated
// job's goroutine, one at a time, with a context that has the values of the
// decorated Start's context (not its cancellation) and the [elector.Term];
// only OnError may also run on a watchdog goroutine, to report a call that
// overran its timeout while that call (which may be OnElected) still runs,
// and OnNewLeader runs on its elector's watch. A panicking hook is logged
// and otherwise ignored. Nil fields are skipped.
//
// Hooks must return promptly: the decorated job waits for each. An OnElected
// that, with the inner Start, overruns the start timeout ([WithStartTimeout])
// loses its term, and the job does not start for that term. An OnDemoted or
// OnError that does not return stalls this replica's campaign (its term has
// ended by then, so another replica can lead), and Stop returns an error
// naming it once the stop timeout has passed.
type Hooks struct {
	// OnElected is called when this replica won a term, before the inner
	// job starts.
	OnElected func(ctx context.Context, t elector.Term)
	// OnDemoted is called when the inner job has stopped (or failed to
	// start) and the term is over: resigned, or abandoned to run out. cause
	// is the error of the inner Start when it failed, and otherwise t.Err():
	// elector.ErrResigned (after Stop, or an OnElected that overran),
	// elector.ErrAbandoned (an inner Stop that failed or overran, or an inner
	// Start that overran), elector.ErrLeaseLost, elector.ErrLeaseExpired or
	// a store error.
	OnDemoted func(ctx context.Context, t elector.Term, cause error)
	// OnError is called when the inner job's Start or Stop failed, panicked
	// or overran its timeout, OnElected overran the start timeout, or the
	// elector failed. It runs once the term the error is about has ended
	// (resigned or abandoned), so a slow OnError never keeps a lease. Without
	// an OnError hook, errors are logged at Error level.
	OnError func(ctx context.Context, err error)
	// OnNewLeader is called, from Start until Stop, with the lease each
	// time its holder changes, whoever leads: first with the current
	// state, then with each new term (this replica's own included) and,
	// with a Lease that has only Name set, when the lease becomes free. It
	// needs an elector that follows its lease (as
	// [elector.LeaseElector.WatchLeader] does); with any other it is never
	// called. It runs on the watch of the elector's Store, which serves
	// every lease of that Store: it must return quickly.
	OnNewLeader func(l elector.Lease)
}

// hookSet is the composition of every WithHooks option, fixed at Decorate.
type hookSet struct {
	elected []func(context.Context, elector.Term)
	demoted []func(context.Context, elector.Term, error)
	errors  []func(context.Context, error)
	leader  []func(elector.Lease)
}

func composeHooks(hs []Hooks) hookSet {
	var s hookSet
	for _, h := range hs {
		if h.OnElected != nil {
			s.elected = append(s.elected, h.OnElected)
		}
		if h.OnDemoted != nil {
			s.demoted = append(s.demoted, h.OnDemoted)
		}
		if h.OnError != nil {
			s.errors = append(s.errors, h.OnError)
		}
		if h.OnNewLeader != nil {
			s.leader = append(s.leader, h.OnNewLeader)
		}
	}
	return s
}

// elected records the new term for Status, reports it (EventElected), logs
// it and runs the OnElected hooks.
func (d *decorated) elected(ctx context.Context, r *run, t elector.Term) {
	d.status.setTerm(t)
	if d.observer != nil {
		trust, _ := trustOf(t)
		d.observe(t, elector.Event{Kind: elector.EventElected, Trust: trust})
	}
	d.logElected(ctx, t)
	for _, f := range d.hooks.elected {
		d.callHook(ctx, r, stepOnElected, func() { f(ctx, t) })
	}
}

// demoted reports the end of the term (EventDemoted with kind; Err is cause
// unless resigned), clears it from Status, logs it and runs the OnDemoted
// hooks.
func (d *decorated) demoted(ctx context.Context, r *run, t elector.Term, cause error, kind elector.Cause) {
	ev := elector.Event{Kind: elector.EventDemoted, Cause: kind}
	if kind != elector.CauseResigned && kind != elector.CauseHandedOff {
		ev.Err = cause
	}
	d.observe(t, ev)
	d.status.mu.Lock()
	since := d.status.since
	d.status.mu.Unlock()
	d.status.setTerm(nil)
	d.logDemoted(ctx, t, since, cause, kind)
	for _, f := range d.hooks.demoted {
		d.callHook(ctx, r, stepOnDemoted, func() { f(ctx, t, cause) })
	}
}

// report hands err to the OnError hooks, or logs it at Error when there are
// none.
func (d *decorated) report(ctx context.Context, r *run, err error) {
	if len(d.hooks.errors) == 0 {
		if d.log.Enabled(ctx, slog.LevelError) {
			d.log.LogAttrs(ctx, slog.LevelError, "leader job error", append(d.logAttrs(ctx, nil), slog.Any("err", err))...)
		}
		return
	}
	for _, f := range d.hooks.errors {
		d.callHook(ctx, r, stepOnError, func() { f(ctx, err) })
	}
}

// callHook runs f and logs a panic instead of letting it escape.
func (d *decorated) callHook(ctx context.Context, r *run, hook step, f func()) {
	r.step(hook)
	name := strings.TrimSuffix(hook.String(), " hook")
	var pe *PanicError
	if errors.As(protect(name, func() error { f(); return nil }), &pe) {
		d.log.LogAttrs(ctx, slog.LevelError, "leader job hook panicked", append(d.logAttrs(ctx, nil),
			slog.String("hook", name), slog.Any("panic", pe.Value), slog.String("stack", string(pe.Stack)))...)
	}
}

// logElected logs the election of term t at Info, with how long the term
// is trusted for if it tells.
func (d *decorated) logElected(ctx context.Context, t elector.Term) {
	if !d.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := d.logAttrs(ctx, t)
	if trust, ok := trustOf(t); ok {
		attrs = append(attrs, durationAttr("trust", trust))
	}
	d.log.LogAttrs(ctx, slog.LevelInfo, "elected", attrs...)
}

// logDemoted logs the end of term t, won at since, at Info if it was
// resigned or handed off and at Warn otherwise (lost, expired, abandoned, a
// store error, or the inner Start failed), with the cause, its error
// unless resigned, and how long the term was held.
func (d *decorated) logDemoted(ctx context.Context, t elector.Term, since time.Time, cause error, kind elector.Cause) {
	level := slog.LevelWarn
	if kind == elector.CauseResigned || kind == elector.CauseHandedOff {
		level = slog.LevelInfo
	}
	if !d.log.Enabled(ctx, level) {
		return
	}
	attrs := append(d.logAttrs(ctx, t), slog.String("cause", kind.String()))
	if !since.IsZero() {
		attrs = append(attrs, durationAttr("held", time.Since(since)))
	}
	if kind != elector.CauseResigned && cause != nil {
		attrs = append(attrs, slog.Any("err", cause))
	}
	d.log.LogAttrs(ctx, level, "demoted", attrs...)
}

// leaderWatcher is an elector that tells each new holder of its lease, as
// [elector.LeaseElector.WatchLeader] does.
type leaderWatcher interface {
	WatchLeader(fn func(elector.Lease)) (stop func())
}

// watchLeader follows the holder of the lease, if the elector tells it and
// an OnNewLeader hook or the log at Info wants it, until the returned stop
// is called: it logs each new holder other than this replica and runs the
// OnNewLeader hooks. An elector that panics (a nil pointer) is followed by
// nothing: its Campaign reports the panic.
func (d *decorated) watchLeader(ctx context.Context) (stop func()) {
	stop = func() {}
	w, ok := d.elector.(leaderWatcher)
	logs := d.log.Enabled(ctx, slog.LevelInfo)
	if !ok || !logs && len(d.hooks.leader) == 0 {
		return stop
	}
	_ = protect("WatchLeader", func() error {
		self := d.holder()
		stop = w.WatchLeader(d.newLeader(ctx, self, logs))
		return nil
	})
	return stop
}

// newLeader returns the function that watchLeader hands the elector.
func (d *decorated) newLeader(ctx context.Context, self string, logs bool) func(elector.Lease) {
	return func(l elector.Lease) {
		if logs && l.Holder != "" && l.Holder != self {
			d.log.LogAttrs(ctx, slog.LevelInfo, fmt.Sprintf("waiting for lease %s, held by %s (token %d)", l.Name, l.Holder, l.Token),
				d.logAttrs(ctx, nil)...)
		}
		for _, f := range d.hooks.leader {
			d.callHook(ctx, nil, stepOnNewLeader, func() { f(l) })
		}
	}
}
