package elector

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leaderaware/leaderaware/internal/clock"
)

// leaseTerm is the [Term] of a [LeaseElector]. One goroutine (renew) keeps
// the lease alive until the term ends; Resign stops it and waits for it.
// The Store's resumeWatch calls resumed after a suspend, which Go's timers
// do not count.
type leaseTerm struct {
	elector     *LeaseElector // for its observer
	store       Store
	ttl         time.Duration
	renewEvery  time.Duration
	token       uint64        // the lease's token; renewals keep it
	name        string        // the lease's name
	done        chan struct{} // closed by end
	stopRenew   context.CancelFunc
	renewExited chan struct{} // closed when the renew goroutine returns
	wake        chan struct{} // resumed asks the renew goroutine to re-arm its timer
	// expiry closes the trust window on time even if the store does not
	// return when a renewal's context ends. It is armed only during store
	// calls (renewing); one timer serves them all.
	expiry *time.Timer

	mu         sync.Mutex
	lease      Lease     // updated by each successful renewal
	trustUntil time.Time // a reading of clock.Now; updated likewise
	err        error     // set once, when done is closed
	renewing   bool      // a renewal is in the store; expiry is armed
	late       time.Time // a reading of clock.Now by which, but for a suspend, the renewal timer has fired

	resignMu sync.Mutex // serializes Resign and Abandon
	settled  bool       // released, or abandoned; guarded by resignMu
}

func startTerm(e *LeaseElector, l Lease, acquireStart time.Time) *leaseTerm {
	ctx, cancel := context.WithCancel(context.Background())
	t := &leaseTerm{
		elector:     e,
		store:       e.store,
		ttl:         e.cfg.TTL,
		renewEvery:  e.cfg.RenewInterval,
		done:        make(chan struct{}),
		stopRenew:   cancel,
		renewExited: make(chan struct{}),
		wake:        make(chan struct{}, 1),
		lease:       l,
		trustUntil:  trustedUntil(acquireStart, e.cfg.TTL),
		token:       l.Token,
		name:        l.Name,
	}
	t.expiry = time.AfterFunc(time.Hour, func() {
		if ctx.Err() == nil {
			t.end(ErrLeaseExpired)
		}
	})
	t.expiry.Stop()
	t.scheduled(acquireStart.Add(t.renewEvery), t.trustUntil)
	leave := watchResumes(t)
	go t.renew(ctx, acquireStart, leave)
	return t
}

// trustedUntil is the end of the trust window that a successful acquire or
// renew, started at start (a reading of clock.Now), opens.
func trustedUntil(start time.Time, ttl time.Duration) time.Time {
	return start.Add(ttl - SafetyMargin(ttl))
}

func (t *leaseTerm) Token() uint64         { return t.token }
func (t *leaseTerm) Done() <-chan struct{} { return t.done }

func (t *leaseTerm) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// TrustRemaining returns how long the term is still trusted: until the end
// of the trust window its last successful acquire or renew opened, on a
// clock that counts suspend; 0 once the term has ended. A call that finds
// the window closed ends the term (ErrLeaseExpired) at once, rather than
// when the renewal timer fires: after a suspend, that timer fires late.
func (t *leaseTerm) TrustRemaining() time.Duration {
	t.mu.Lock()
	left := clock.Until(t.trustUntil)
	ended := t.err != nil
	t.mu.Unlock()
	if ended {
		return 0
	}
	if left <= 0 {
		t.end(ErrLeaseExpired)
		return 0
	}
	return left
}

func (t *leaseTerm) Lease() Lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lease
}

// resumed acts on a resume from a suspend, which delayed the term's timers:
// it ends the term if its trust window has closed, re-arms the expiry of a
// renewal in the store on the elapsed clock, and wakes the renew goroutine
// to re-arm its timer likewise.
func (t *leaseTerm) resumed() {
	t.mu.Lock()
	left := clock.Until(t.trustUntil)
	if t.renewing && left > 0 {
		t.expiry.Reset(left)
	}
	t.mu.Unlock()
	if left <= 0 {
		t.end(ErrLeaseExpired)
	}
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// scheduled records that the renewal timer fires at next, by the trust
// window's end, for the resumeWatch: it finds the timer late (delayed by a
// suspend) a RenewInterval after that.
func (t *leaseTerm) scheduled(next, trustUntil time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.late = next.Add(t.renewEvery)
	if trustUntil.Before(t.late) {
		t.late = trustUntil
	}
}

// lateAt returns the instant scheduled recorded.
func (t *leaseTerm) lateAt() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.late
}

// setRenewing records whether a renewal is in the store, arming the expiry
// timer for the trust left while it is.
func (t *leaseTerm) setRenewing(renewing bool, trust time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.renewing = renewing
	if renewing {
		t.expiry.Reset(trust)
	} else {
		t.expiry.Stop()
	}
}

// end ends the term with err unless it has ended already.
func (t *leaseTerm) end(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		t.err = err
		close(t.done)
	}
}

// Resign implements [Term].
func (t *leaseTerm) Resign(ctx context.Context) error {
	t.resignMu.Lock()
	defer t.resignMu.Unlock()
	if t.settled {
		return nil
	}
	t.end(ErrResigned)
	t.stopRenew()
	select {
	case <-t.renewExited:
	case <-ctx.Done():
		return fmt.Errorf("elector: resign lease %q: %w", t.name, ctx.Err())
	}
	l := t.Lease()
	start := clock.Now()
	err := t.store.Release(ctx, l)
	t.elector.observeOp(OpRelease, l.Token, start, clock.Now(), err)
	if err != nil {
		return fmt.Errorf("elector: resign lease %q token %d: %w", l.Name, l.Token, err)
	}
	t.settled = true
	return nil
}

// Abandon implements [Term]. It waits for the renewal in flight, which the
// trust window bounds.
func (t *leaseTerm) Abandon() {
	t.resignMu.Lock()
	defer t.resignMu.Unlock()
	if t.settled {
		return
	}
	t.end(ErrAbandoned)
	t.stopRenew()
	<-t.renewExited
	t.settled = true
}

// renew renews the lease until ctx ends, the store says the lease is lost,
// or the trust window closes. Renewals start renewEvery after the start of
// the last successful acquire or renew (the instant the trust window counts
// from), so however long a store call took, at least two attempts fit in the
// window; after a failure it retries sooner. A wake (after a resume)
// re-arms the timer, which the suspend delayed. leave leaves the Store's
// resumeWatch.
func (t *leaseTerm) renew(ctx context.Context, acquireStart time.Time, leave func()) {
	defer close(t.renewExited)
	defer leave()
	defer t.expiry.Stop()
	retryEvery := max(t.renewEvery/4, time.Millisecond)
	trustUntil := trustedUntil(acquireStart, t.ttl)
	next := acquireStart.Add(t.renewEvery)
	var lastErr error
	timer := time.NewTimer(clock.Until(next))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.wake:
			timer.Reset(clock.Until(next))
			continue
		case <-timer.C:
		}
		start := clock.Now()
		if !start.Before(trustUntil) {
			if lastErr != nil {
				t.end(fmt.Errorf("%w (last renewal: %v)", ErrLeaseExpired, lastErr))
			} else {
				t.end(ErrLeaseExpired)
			}
			return
		}
		trust := trustUntil.Sub(start)
		t.setRenewing(true, trust)
		// One attempt never takes the whole window: a call stuck on a dead
		// connection leaves time to retry on another.
		rctx, cancel := context.WithTimeout(ctx, min(t.renewEvery, trust))
		l, err := t.store.Renew(rctx, t.Lease(), t.ttl)
		cancel()
		t.setRenewing(false, 0)
		select {
		case <-t.done:
			return // expired (or resigned) while the store had the call
		default:
		}
		end := clock.Now()
		t.elector.observeOp(OpRenew, t.token, start, end, err)
		switch {
		case err == nil:
			trustUntil = trustedUntil(start, t.ttl)
			t.mu.Lock()
			t.lease, t.trustUntil = l, trustUntil
			t.mu.Unlock()
			next, lastErr = start.Add(t.renewEvery), nil
		case ctx.Err() != nil:
			return // resigned
		case errors.Is(err, ErrLeaseLost):
			t.end(err)
			return
		default:
			next, lastErr = end.Add(retryEvery), err
		}
		if trustUntil.Before(next) {
			next = trustUntil
		}
		t.scheduled(next, trustUntil)
		timer.Reset(next.Sub(end))
	}
}
