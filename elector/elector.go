package elector

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/leaderaware/leaderaware/internal/clock"
)

// Elector campaigns for leadership. [LeaseElector] is the implementation;
// the interface lets callers substitute their own.
type Elector interface {
	// Campaign blocks until the caller leads, or ctx ends (then it returns
	// ctx's error). A store failure other than ErrHeld is returned too, so the
	// caller can report it and campaign again. A term won just as ctx ended
	// is still returned: the caller must resign it.
	Campaign(ctx context.Context) (Term, error)
}

// Term is one period of leadership. Its methods are safe for concurrent use.
// A term renews its lease until it ends: a caller that no longer needs it
// must Resign or Abandon it, even after Done is closed.
type Term interface {
	// Lease returns the lease as of the term's last successful acquire or
	// renew: its name, holder and token identify the term to a fenced write.
	Lease() Lease
	// Token is the fencing token: every later term of the same name has a
	// larger one.
	Token() uint64
	// Done is closed when the term ends.
	Done() <-chan struct{}
	// TrustRemaining returns how long the holder may still trust the term:
	// until the start of its last successful acquire or renew plus TTL
	// minus [SafetyMargin], on a clock that counts suspend; 0 once the term
	// has ended. A call that finds the window closed ends the term
	// (ErrLeaseExpired).
	TrustRemaining() time.Duration
	// Err is nil until Done is closed; then it is ErrResigned, ErrAbandoned,
	// ErrLeaseLost, ErrLeaseExpired or a store error (match with errors.Is).
	Err() error
	// Resign ends the term and frees the lease at once. It is safe to call
	// twice; a call after a successful one, or after Abandon, returns nil.
	Resign(ctx context.Context) error
	// Abandon ends the term without freeing the lease: renewals stop and
	// the lease runs out in the store, so candidates take it over one TTL
	// later. Use it when the work of the term may still be running.
	Abandon()
}

// LeaseElector is an [Elector] for one lease name in one [Store]. Each
// LeaseElector is one candidate (one holder name). It holds no goroutine of
// its own: Campaign runs on the caller's goroutine, and the electors of one
// Store value share one renewal schedule for their terms and one watch of
// the leases their candidates wait on, which run a fixed number of
// goroutines per Store however many leases it serves, and none once its
// terms have ended and its campaigns returned. A LeaseElector is safe for
// concurrent use, but a candidate normally campaigns once at a time.
type LeaseElector struct {
	store Store
	clock clock.Clock // the Store's (clock.Of)
	name  string
	cfg   Config

	mu    sync.Mutex
	watch watch // kept across campaigns

	key any           // its Store's runtime's (see runtimeKey)
	rt  *storeRuntime // the runtime it last joined; guarded by runtimes.mu
}

// watch is what a candidate saw of a held lease: the lease, and the instant
// (by the elector's clock) it first saw that Token and Version.
type watch struct {
	lease  Lease
	since  time.Time
	readAt time.Time // the start of its last read when the Campaign that watched it returned
}

// New returns an elector for the lease name in s. It validates name (1–255
// bytes of printable UTF-8) and cfg (see [Config]); errors name the bad value.
func New(s Store, name string, cfg Config) (*LeaseElector, error) {
	if s == nil {
		return nil, errors.New("elector: nil Store")
	}
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	e := &LeaseElector{store: s, clock: clock.Of(s), name: name, cfg: cfg}
	e.key = runtimeKey(e)
	return e, nil
}

// Name returns the lease name.
func (e *LeaseElector) Name() string { return e.name }

// Config returns the configuration in force, with defaults filled in.
func (e *LeaseElector) Config() Config { return e.cfg }

// Campaign implements [Elector]. It takes a free lease at once. While
// another holder has the lease, it watches it, through one watch of every
// lease the candidates of its Store wait on (read at least every
// min(RetryInterval, SafetyMargin(TTL)/2), and at once on the Store's
// [Notifier]), making no store calls of its own; once it has seen the same
// Token and Version unchanged for the holder's TTL (and at least its own),
// measured on its own clock from the first moment it saw them, it takes the
// lease over with a compare-and-set on that state. Any other state it is
// handed, and any state a failed compare-and-set returns, older ones
// included, starts the watch again; so does a gap in its reads of the lease
// (one that starts more than SafetyMargin(TTL) after the last successful
// one, or none started within that margin when the watch would complete):
// a rollback of the row inside the gap could hide the holder's renewals,
// and the holder's next renewal after a rollback lands before the takeover
// only if reads leave no longer gap. On a [CompleteNotifier], a Sync counts
// as a read, and the watch reads every RetryInterval while its Syncs
// succeed and it missed no push. The watch is kept across calls to
// Campaign. Each store call is bounded by the trust window (TTL minus
// TTL/10): an acquire that takes longer could not be trusted anyway. With a
// [Config.Placer], each attempt to take the lease first waits as long as
// its Hold asks, at most the TTL.
func (e *LeaseElector) Campaign(ctx context.Context) (Term, error) {
	var sub *subscription // from the first ErrHeld
	defer func() {
		if sub != nil {
			e.mu.Lock()
			e.watch.readAt = sub.readStart()
			e.mu.Unlock()
			sub.stop()
			sub.h.rt.leave()
		}
	}()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	trust := e.cfg.TTL - SafetyMargin(e.cfg.TTL)
	for {
		if !e.hold(ctx, &timer) {
			return nil, ctx.Err()
		}
		if sub == nil {
			e.resumeWatch() // nothing read the watch since an earlier Campaign
		} else if e.cfg.Placer != nil {
			e.heldBack(sub)
		}
		observed, left := e.watched()
		if left <= 0 && sub != nil && !sub.fresh() {
			left = e.watchLease(observed, true) // reads failed up to now: a gap
		}
		if left > 0 {
			observed = Lease{} // not watched long enough: take it only if free
		}
		start := e.clock.Now() // the trust window counts from before the store's write
		actx, cancel := context.WithTimeout(ctx, trust)
		l, err := e.store.TryAcquire(actx, e.name, e.cfg.Holder, e.cfg.TTL, observed)
		cancel()
		end := e.clock.Now()
		e.observeOp(OpAcquire, l.Token, start, end, err)
		var held *HeldError
		switch {
		case err == nil && end.Before(trustedUntil(start, e.cfg.TTL)):
			e.forget()
			e.observe(Event{Kind: EventCampaign, Token: l.Token, Result: ResultOK, Trust: trustedUntil(start, e.cfg.TTL).Sub(end)})
			term := startTerm(e, l, start)
			term.rt.tell(l)
			if e.cfg.Placer != nil {
				e.lead(term, trust)
			}
			return term, nil
		case err == nil:
			// The acquire took so long that its trust window has closed:
			// nobody could use it safely. Give it back and try again later.
			e.forget()
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), trust)
			_ = e.store.Release(rctx, l) // if it fails, the lease runs out on its own
			cancel()
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.As(err, &held):
			left = e.watchLease(held.Lease, false)
		case errors.Is(err, ErrHeld):
			// A store that does not say what it saw: nothing to watch.
		default:
			e.observe(Event{Kind: EventCampaign, Result: ResultError, Err: err})
			return nil, fmt.Errorf("elector: campaign for lease %q: %w", e.name, err)
		}
		if err != nil {
			e.observe(Event{Kind: EventCampaign, Result: ResultHeld})
			seen, _ := e.watched()
			if sub == nil {
				sub = join(e).hub.subscribe(e.name, e.cfg.RetryInterval, e.cfg.TTL, seen, nil)
			} else {
				sub.saw(seen)
			}
		}
		// Wait for the lease to be free or for the watch to complete (the
		// moment it does); with nothing to watch, try again after a
		// jittered RetryInterval.
		for waiting := true; waiting; {
			wait := left
			if left <= 0 {
				wait = jitter(e.cfg.RetryInterval)
			}
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			var states <-chan state
			if sub != nil {
				states = sub.states
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-timer.C:
				waiting = false
			case l := <-states:
				if l.Token == 0 {
					waiting = false // free
				} else {
					left = e.watchLease(l.Lease, l.restart)
				}
			}
		}
	}
}

// lead hands term to the Placer for its yield channel. If Lead panics, it
// resigns the term, within trust, before the panic goes on: nobody else
// would end it.
func (e *LeaseElector) lead(term *leaseTerm, trust time.Duration) {
	ok := false
	defer func() {
		if !ok {
			ctx, cancel := context.WithTimeout(context.Background(), trust)
			_ = term.Resign(ctx) // if it fails, the lease runs out on its own
			cancel()
		}
	}()
	term.yield = e.cfg.Placer.Lead(e.name, term)
	ok = true
}

// hold waits as long as the Placer asks before an attempt to take the
// lease, at most the TTL, and reports false if ctx ended first.
func (e *LeaseElector) hold(ctx context.Context, timer **time.Timer) bool {
	if e.cfg.Placer == nil {
		return true
	}
	d := min(e.cfg.Placer.Hold(e.name), e.cfg.TTL)
	if d <= 0 {
		return true
	}
	if *timer == nil {
		*timer = time.NewTimer(d)
	} else {
		(*timer).Reset(d)
	}
	select {
	case <-ctx.Done():
		return false
	case <-(*timer).C:
		return true
	}
}

// watchLease records that the candidate saw l now, starting a new watch if
// l is any other state than the one it watches or restart is set, and
// returns how long the watch has left. An older state restarts it too: a
// row rolled back by a standby failover or a restore shows one, and a watch that kept the newer
// state would never succeed if the holder is dead. Since versions never
// repeat, a restart can only delay a takeover.
func (e *LeaseElector) watchLease(l Lease, restart bool) time.Duration {
	e.mu.Lock()
	if restart || !same(l, e.watch.lease) {
		e.watch = watch{lease: l, since: e.clock.Now()}
	}
	e.mu.Unlock()
	_, left := e.watched()
	return left
}

// heldBack takes the state the watch handed over while the Placer held the
// attempt back, if any: any other state restarts the watch, and a free one
// drops it, since the state it watched may have come back (a rollback) while
// a new term is trusted.
func (e *LeaseElector) heldBack(sub *subscription) {
	select {
	case l := <-sub.states:
		if l.Token == 0 {
			e.forget() // the attempt takes the lease only if it is free
		} else {
			e.watchLease(l.Lease, l.restart)
		}
	default:
	}
}

// resumeWatch restarts the watch kept from an earlier Campaign if its last
// read started more than the margin ago: nothing read it since that
// Campaign returned (nor during a hold before the first attempt), a gap
// (see Campaign).
func (e *LeaseElector) resumeWatch() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if now := e.clock.Now(); e.watch.lease.Token != 0 && now.Sub(e.watch.readAt) > SafetyMargin(e.cfg.TTL) {
		e.watch.since = now
	}
}

// watched returns the lease being watched (the zero Lease if none) and how
// long until the watch completes: the longer of the holder's TTL and this
// candidate's, so a store that reports no TTL never shortens it.
func (e *LeaseElector) watched() (Lease, time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.watch.lease.Token == 0 {
		return Lease{}, 0
	}
	return e.watch.lease, max(e.watch.lease.TTL, e.cfg.TTL) - e.clock.Now().Sub(e.watch.since)
}

// forget drops the watch: the lease it watched has been taken.
func (e *LeaseElector) forget() {
	e.mu.Lock()
	e.watch = watch{}
	e.mu.Unlock()
}

// WatchLeader calls fn with the state of e's lease each time its holder
// changes, until stop is called: first with the current state, then with
// each state whose Holder or Token differs from the last reported (a new
// term, this candidate's own included), and with a Lease that has only
// Name set when the lease becomes free. It follows the one watch of e's
// Store (read at least every RetryInterval, and at once on the Store's
// [Notifier] and on the terms this process acquires and resigns through
// it), making no store calls of its own. fn runs on the watch's goroutine,
// one call at a time: it must return quickly and must not call stop. fn is
// never called after stop returns. A nil fn watches nothing.
func (e *LeaseElector) WatchLeader(fn func(Lease)) (stop func()) {
	if fn == nil {
		return func() {}
	}
	rt := join(e)
	sub := rt.hub.subscribe(e.name, e.cfg.RetryInterval, e.cfg.TTL, Lease{}, fn)
	return sync.OnceFunc(func() {
		sub.stop()
		rt.leave()
	})
}

// Leader returns the current lease of this elector's name, whoever holds it,
// or an error matching [ErrNoLease] if it is free.
func (e *LeaseElector) Leader(ctx context.Context) (Lease, error) {
	return e.store.Get(ctx, e.name)
}

// jitter returns a duration in [d/2, d].
func jitter(d time.Duration) time.Duration {
	half := d / 2
	return half + rand.N(d-half+1)
}

// observe hands ev, completed with the lease and holder, to the observer.
func (e *LeaseElector) observe(ev Event) {
	if e.cfg.Observer == nil {
		return
	}
	ev.Lease, ev.Holder = e.name, e.cfg.Holder
	e.cfg.Observer.Observe(ev)
}

// opClock returns clock.Now for observeOp, or the zero Time if e has no
// Observer (observeOp reports nothing then), which costs no clock reading.
func (e *LeaseElector) opClock() time.Time {
	if e.cfg.Observer == nil {
		return time.Time{}
	}
	return e.clock.Now()
}

// observeOp reports a store call that ran from start to end.
func (e *LeaseElector) observeOp(op Op, token uint64, start, end time.Time, err error) {
	if e.cfg.Observer == nil {
		return
	}
	ev := Event{Kind: EventStoreOp, Op: op, Token: token, Result: ResultOf(err), Duration: end.Sub(start), Err: err}
	if op == OpRenew && err == nil {
		ev.Trust = trustedUntil(start, e.cfg.TTL).Sub(end)
	}
	e.observe(ev)
}
