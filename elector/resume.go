package elector

import (
	"reflect"
	"sync"
	"time"

	"github.com/leaderaware/leaderaware/internal/clock"
)

// resumeCheckEvery is how often a resumeWatch reads clock.Suspended: the
// longest a term goes on after a resume before it acts on it.
const resumeCheckEvery = 25 * time.Millisecond

// A resumeWatch tells the terms held through one Store that the machine has
// resumed from a suspend. Go's timers stop during a suspend, so a term's
// renewal and expiry timers fire late by the suspend's length, while its
// trust window (clock.Now) counts it. One goroutine per Store with held
// terms reads clock.Suspended every resumeCheckEvery (a cheap check, one for
// all the Store's terms) and, when it has changed, calls every term's
// resumed. The goroutine starts with the Store's first term and ends with
// its last, whose renew goroutine waits for it. It is per Store, not per
// process, so that the terms of one synctest bubble (tests give each bubble
// its own Store) are served by a goroutine of that bubble: a bubble must not
// touch another's channels and timers, and a goroutine blocked on a file (a
// timerfd) would stop its fake clock.
type resumeWatch struct {
	terms map[*leaseTerm]struct{} // guarded by resumeWatches.mu
	stop  chan struct{}           // closed when the last term leaves
	done  chan struct{}           // closed when run returns
}

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
	resumeWatches.mu.Lock()
	defer resumeWatches.mu.Unlock()
	w := resumeWatches.m[key]
	if w == nil {
		w = &resumeWatch{terms: map[*leaseTerm]struct{}{}, stop: make(chan struct{}), done: make(chan struct{})}
		if resumeWatches.m == nil {
			resumeWatches.m = map[any]*resumeWatch{}
		}
		resumeWatches.m[key] = w
		// Read before t's renewal timer is armed, so that a suspend after
		// it shows as a change; the timer counts any before.
		go w.run(clock.Suspended())
	}
	w.terms[t] = struct{}{}
	return func() {
		resumeWatches.mu.Lock()
		delete(w.terms, t)
		last := len(w.terms) == 0
		if last {
			delete(resumeWatches.m, key)
			close(w.stop)
		}
		resumeWatches.mu.Unlock()
		if last {
			<-w.done
		}
	}
}

// run calls resumed on every term of w each time clock.Suspended has
// changed, until w.stop is closed. slept is its reading when w started.
func (w *resumeWatch) run(slept time.Duration) {
	defer close(w.done)
	tick := time.NewTicker(resumeCheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		if s := clock.Suspended(); s != slept {
			slept = s
			for _, t := range w.held() {
				t.resumed()
			}
		}
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
