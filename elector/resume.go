package elector

import (
	"reflect"
	"sync"
	"time"

	"github.com/leaderaware/leaderaware/internal/clock"
)

// A resumeWatch tells the terms held through one Store that the machine has
// resumed from a suspend. Go's timers stop during a suspend, so a term's
// renewal and expiry timers fire late by the suspend's length, while its
// trust window (clock.Now) counts it.
//
// How it works: one goroutine per Store with held terms waits on a
// clock.Waker (a CLOCK_BOOTTIME timerfd in production) set to the earliest
// instant by which some term's renewal timer must have fired (its late
// instant: the next renewal plus RenewInterval, or the end of the trust
// window if sooner). Without a suspend, every term renews before its late
// instant, so the Waker fires about once per RenewInterval; a suspend that
// passes it fires it on the resume. On every wake the goroutine reads
// clock.Suspended, and when it has changed it calls every term's resumed;
// then it sets the Waker again. It starts with the Store's first term and
// ends with its last, whose renew goroutine waits for it. It is per Store,
// not per process, so that the terms of one synctest bubble (each test has
// its own Store) are served by a goroutine of that bubble: a bubble must not
// touch another's channels and timers.
type resumeWatch struct {
	waker *clock.Waker
	done  chan struct{} // closed when run returns

	// Guarded by resumeWatches.mu:
	terms map[*leaseTerm]struct{}
	set   time.Time // the Waker's deadline
}

// resumeRecheck is the least time between two wakes of a resumeWatch, so a
// term late for another reason (a slow renewal) wakes it only this often.
const resumeRecheck = 100 * time.Millisecond

var resumeWatches struct {
	mu sync.Mutex
	m  map[any]*resumeWatch // by Store (or elector, for a Store that is no map key)
}

// watchResumes adds t to the resume watch of its Store, starting the watch
// if t is its first term. leave removes t, and if t was the last term, ends
// the watch and waits for its goroutine.
func watchResumes(t *leaseTerm) (leave func()) {
	var key any = t.elector
	if reflect.ValueOf(t.store).Comparable() {
		key = t.store
	}
	late := t.lateAt()
	resumeWatches.mu.Lock()
	defer resumeWatches.mu.Unlock()
	w := resumeWatches.m[key]
	if w == nil {
		w = &resumeWatch{waker: clock.NewWaker(), done: make(chan struct{}), terms: map[*leaseTerm]struct{}{}}
		if resumeWatches.m == nil {
			resumeWatches.m = map[any]*resumeWatch{}
		}
		resumeWatches.m[key] = w
		// Read before t's renewal timer is armed: that timer counts an
		// earlier suspend, and a later one shows as a change.
		go w.run(clock.Suspended())
	}
	w.terms[t] = struct{}{}
	if w.set.IsZero() || late.Before(w.set) {
		w.set = late
		w.waker.Set(late)
	}
	return func() {
		resumeWatches.mu.Lock()
		delete(w.terms, t)
		last := len(w.terms) == 0
		if last {
			delete(resumeWatches.m, key)
			w.waker.Stop()
		}
		resumeWatches.mu.Unlock()
		if last {
			<-w.done
		}
	}
}

// run calls resumed on every term of w each time clock.Suspended has
// changed, until the Waker stops. slept is its reading when w started.
func (w *resumeWatch) run(slept time.Duration) {
	defer close(w.done)
	for w.waker.Wait() {
		if s := clock.Suspended(); s != slept {
			slept = s
			for _, t := range w.held() {
				t.resumed()
			}
		}
		w.setNext()
	}
}

// held returns the terms of w.
func (w *resumeWatch) held() []*leaseTerm {
	resumeWatches.mu.Lock()
	defer resumeWatches.mu.Unlock()
	terms := make([]*leaseTerm, 0, len(w.terms))
	for t := range w.terms {
		terms = append(terms, t)
	}
	return terms
}

// setNext sets the Waker to the earliest late instant of w's terms, or
// resumeRecheck from now if that is sooner. A term's late instant only moves
// forward, so one that a term sets later never comes before it. Once the
// last term has left (and stopped the Waker) it does nothing.
func (w *resumeWatch) setNext() {
	resumeWatches.mu.Lock()
	defer resumeWatches.mu.Unlock()
	if len(w.terms) == 0 {
		return
	}
	var next time.Time
	for t := range w.terms {
		if late := t.lateAt(); next.IsZero() || late.Before(next) {
			next = late
		}
	}
	if floor := clock.Now().Add(resumeRecheck); next.Before(floor) {
		next = floor
	}
	w.set = next
	w.waker.Set(next)
}
