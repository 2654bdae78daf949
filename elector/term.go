package elector

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// leaseTerm is the [Term] of a [LeaseElector]. Its Store's scheduler renews
// it; its expiry timer ends it when its trust window closes.
type leaseTerm struct {
	elector    *LeaseElector // for its observer and clock
	rt         *storeRuntime
	ttl        time.Duration
	renewEvery time.Duration
	token      uint64             // the lease's token; renewals keep it
	name       string             // the lease's name
	done       chan struct{}      // closed by end
	ctx        context.Context    // ends with the term: a renewal in the store alone uses it
	cancel     context.CancelFunc // ends ctx
	expiry     *time.Timer        // ends the term when its trust window closes; made by the first expire, guarded by mu
	yield      <-chan struct{}    // from the elector's Placer; set before Campaign returns the term

	mu         sync.Mutex
	lease      Lease     // updated by each successful renewal
	trustUntil time.Time // a reading of clock.Now; updated likewise
	lastErr    error     // of the last renewal, nil if it succeeded
	err        error     // set once, when done is closed

	// Guarded by rt.sched.mu:
	next     time.Time     // when the next renewal is due (a reading of clock.Now)
	inFlight chan struct{} // while a renewal is queued or in the store; closed when it returns

	resignMu sync.Mutex // serializes Resign and Abandon
	settled  bool       // released, or abandoned; guarded by resignMu
	left     bool       // has left rt; guarded by resignMu
}

func startTerm(e *LeaseElector, l Lease, acquireStart time.Time) *leaseTerm {
	ctx, cancel := context.WithCancel(context.Background())
	t := &leaseTerm{
		elector:    e,
		rt:         join(e),
		ttl:        e.cfg.TTL,
		renewEvery: e.cfg.RenewInterval,
		done:       make(chan struct{}),
		ctx:        ctx,
		cancel:     cancel,
		lease:      l,
		trustUntil: trustedUntil(acquireStart, e.cfg.TTL),
		token:      l.Token,
		name:       l.Name,
	}
	// The expiry timer is armed after add, which reads the resume
	// watch's baseline of clock.Suspended: a suspend from then on shows
	// as a change.
	t.rt.sched.add(t, acquireStart)
	t.expire()
	return t
}

// trustedUntil is the end of the trust window that a successful acquire or
// renew, started at start (a reading of clock.Now), opens.
func trustedUntil(start time.Time, ttl time.Duration) time.Time {
	return start.Add(ttl - SafetyMargin(ttl))
}

func (t *leaseTerm) Token() uint64          { return t.token }
func (t *leaseTerm) Done() <-chan struct{}  { return t.done }
func (t *leaseTerm) Yield() <-chan struct{} { return t.yield }

func (t *leaseTerm) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// TrustRemaining returns how long the term is still trusted: until the end
// of the trust window its last successful acquire or renew opened, on a
// clock that counts suspend; 0 once the term has ended. A call that finds
// the window closed ends the term (ErrLeaseExpired) at once, rather than
// when the expiry timer fires: after a suspend, that timer fires late.
func (t *leaseTerm) TrustRemaining() time.Duration {
	t.mu.Lock()
	left := t.trustUntil.Sub(t.elector.clock.Now())
	ended := t.err != nil
	t.mu.Unlock()
	if ended {
		return 0
	}
	if left <= 0 {
		t.expire()
		return 0
	}
	return left
}

func (t *leaseTerm) Lease() Lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lease
}

// trustEnd returns the end of the trust window.
func (t *leaseTerm) trustEnd() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.trustUntil
}

// expire ends the term if its trust window has closed, and otherwise
// re-arms the expiry timer for the trust left.
func (t *leaseTerm) expire() {
	t.mu.Lock()
	left := t.trustUntil.Sub(t.elector.clock.Now())
	if left > 0 || t.err != nil {
		if t.err == nil {
			t.armExpiry(left)
		}
		t.mu.Unlock()
		return
	}
	err := ErrLeaseExpired
	if t.lastErr != nil {
		err = fmt.Errorf("%w (last renewal: %v)", ErrLeaseExpired, t.lastErr)
	}
	t.mu.Unlock()
	t.end(err)
}

// armExpiry has the expiry timer end the term d from now. t.mu is held.
func (t *leaseTerm) armExpiry(d time.Duration) {
	if t.expiry == nil {
		t.expiry = time.AfterFunc(d, t.expire)
		return
	}
	t.expiry.Reset(d)
}

// resumed acts on a resume from a suspend, which delayed the term's timers:
// it ends the term if its trust window has closed, and otherwise re-arms
// its expiry timer on the elapsed clock.
func (t *leaseTerm) resumed() { t.expire() }

// renewedAt records the outcome of a renewal that ran from start to end
// and returns when the next is due (zero if none: the term has ended).
func (t *leaseTerm) renewedAt(start, end time.Time, l Lease, err error) time.Time {
	if t.Err() != nil {
		return time.Time{} // expired (or resigned) while the store had the call
	}
	t.elector.observeOp(OpRenew, t.token, start, end, err)
	var next time.Time
	t.mu.Lock()
	switch {
	case t.err != nil:
	case err == nil:
		t.lease, t.trustUntil, t.lastErr = l, trustedUntil(start, t.ttl), nil
		t.armExpiry(t.trustUntil.Sub(t.elector.clock.Now()))
		next = start.Add(t.renewEvery)
	case errors.Is(err, ErrLeaseLost):
	default:
		t.lastErr = err
		next = end.Add(max(t.renewEvery/4, time.Millisecond))
	}
	t.mu.Unlock()
	if next.IsZero() && errors.Is(err, ErrLeaseLost) {
		t.end(err)
	}
	return next
}

// end ends the term with err unless it has ended already, and takes it off
// the schedule.
func (t *leaseTerm) end(err error) {
	t.mu.Lock()
	first := t.err == nil
	if first {
		t.err = err
		close(t.done)
		if t.expiry != nil {
			t.expiry.Stop()
		}
	}
	t.mu.Unlock()
	if first {
		t.cancel()
		t.rt.sched.drop(t)
	}
}

// Resign implements [Term]. It waits for the renewal in flight, so that the
// release comes after it.
func (t *leaseTerm) Resign(ctx context.Context) error {
	t.resignMu.Lock()
	defer t.resignMu.Unlock()
	if t.settled {
		return nil
	}
	t.end(ErrResigned)
	if flight := t.rt.sched.drop(t); flight != nil {
		select {
		case <-flight:
		case <-ctx.Done():
			return fmt.Errorf("elector: resign lease %q: %w", t.name, ctx.Err())
		}
	}
	t.leave()
	l := t.Lease()
	start := t.elector.opClock()
	err := t.rt.store.Release(ctx, l)
	t.elector.observeOp(OpRelease, l.Token, start, t.elector.opClock(), err)
	if err != nil {
		return fmt.Errorf("elector: resign lease %q token %d: %w", l.Name, l.Token, err)
	}
	tell(t.elector, Lease{Name: l.Name})
	t.settled = true
	return nil
}

// Abandon implements [Term]. It waits for the renewal in flight, which its
// deadline bounds.
func (t *leaseTerm) Abandon() {
	t.resignMu.Lock()
	defer t.resignMu.Unlock()
	if t.settled {
		return
	}
	t.end(ErrAbandoned)
	if flight := t.rt.sched.drop(t); flight != nil {
		<-flight
	}
	t.leave()
	t.settled = true
}

// leave leaves the Store's runtime once. t.resignMu is held.
func (t *leaseTerm) leave() {
	if !t.left {
		t.left = true
		t.rt.leave()
	}
}
