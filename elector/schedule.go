package elector

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/leaderaware/leaderaware/internal/clock"
)

// Bounds of the renewal schedule of one Store: at most renewWorkers store
// calls in flight, each of at most maxBatch terms.
const (
	renewWorkers = 16
	maxBatch     = 500
)

// resumeRecheck is the least time between two wakes of the resume watch, so
// a term late for another reason (a slow renewal) wakes it only this often.
const resumeRecheck = 100 * time.Millisecond

// resumeWatchDelay is how long after the acquire of a Store's first term
// its resume watch starts: a suspend in that first millisecond is noticed a
// millisecond late (as late as clock.Now may show it), and a term that ends
// sooner costs no goroutine and no timerfd.
const resumeWatchDelay = time.Millisecond

// scheduler renews every term held through one Store.
//
// How it works: each term is due RenewInterval after the start of its last
// successful acquire or renew (RenewInterval/4 after the end of a failed
// renewal). One timer runs dispatch when the soonest term is due (or the
// resume watch is to start, which dispatch starts); it takes
// that term and every other term due within a quarter of its own
// RenewInterval, so a term renews at most that much early, and queues them:
// in chunks of up to maxBatch for one RenewMany each when the Store is a
// BatchRenewer, else one Renew each. Up to renewWorkers goroutines run the
// queue, so a hung call delays no other term's renewal; each call is
// bounded by the least RenewInterval among the Store's terms when it was
// queued and by its own terms' trust left, so that calls that hang, as many
// as there are workers, free one for any term in time. A term's trust window
// is closed by its own timer (expiry), never by the schedule. Between
// renewals the schedule runs no goroutine.
//
// Go's timers stop during a suspend, while the trust window (clock.Now)
// counts it, so the resume watch, one goroutine while there are terms
// (from resumeWatchDelay after the first), waits on a clock.Waker (a
// CLOCK_BOOTTIME timerfd in production) set to the earliest instant by
// which some term's renewal must have happened (its late instant: next due
// plus RenewInterval, or its trust end if sooner). Without a suspend every
// term renews before that, so it wakes about once per RenewInterval; a
// suspend that passes it wakes it on the resume. When clock.Suspended has
// changed since the first term came (or since its last wake) it ends each
// term whose window closed, re-arms the others' expiry timers and runs
// dispatch.
type scheduler struct {
	rt    *storeRuntime
	batch BatchRenewer // the Store's, or nil

	mu      sync.Mutex
	terms   map[*leaseTerm]struct{}
	timer   *time.Timer // runs dispatch; made at the first add
	armed   bool        // timer is to run dispatch (counted in rt.wg)
	timerAt time.Time   // when, if armed
	queue   []renewal
	workers int // running work; busy of them are in a store call
	busy    int

	// The resume watch:
	watching watchState
	watchAt  time.Time     // when dispatch is to start it, if pending
	slept    time.Duration // clock.SuspendedSoFar when the first term came
	waker    clock.Waker   // while it runs
	wakeAt   time.Time     // the Waker's deadline
}

// watchState is where the resume watch is.
type watchState uint8

const (
	watchOff     watchState = iota
	watchPending            // dispatch is to start it at watchAt
	watchRunning            // on s.waker
)

// renewal is one queued store call: the terms it renews, and the least
// RenewInterval among the Store's terms when it was queued.
type renewal struct {
	terms []*leaseTerm
	every time.Duration
}

func (s *scheduler) init(rt *storeRuntime) {
	s.rt = rt
	s.batch, _ = rt.store.(BatchRenewer)
	s.terms = map[*leaseTerm]struct{}{}
}

// add schedules t, whose acquire started at start, unless t has ended
// already: its first renewal is due RenewInterval later.
func (s *scheduler) add(t *leaseTerm, start time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.Err() != nil {
		return
	}
	t.next = start.Add(t.renewEvery)
	s.terms[t] = struct{}{}
	switch s.watching {
	case watchOff:
		// Read before t's timers are armed: they count an earlier
		// suspend, and a later one shows as a change, as does one that
		// the reading, which may be a millisecond old, missed (a
		// change that finds every window open ends no term).
		s.slept = s.rt.clock.SuspendedSoFar()
		s.watching, s.watchAt = watchPending, start.Add(resumeWatchDelay)
		s.wake(s.watchAt)
	case watchRunning:
		if late := s.lateAt(t); s.wakeAt.IsZero() || late.Before(s.wakeAt) {
			s.wakeAt = late
			s.waker.Set(late)
		}
	}
	s.wake(t.next)
}

// drop unschedules t, which has ended, and returns its renewal in flight
// (nil if none), which closes when the call returns.
func (s *scheduler) drop(t *leaseTerm) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.terms[t]; ok {
		delete(s.terms, t)
		if len(s.terms) == 0 {
			s.idle()
		}
	}
	return t.inFlight
}

// idle stops the timer and the resume watch once the last term has gone.
// A dispatch already under way finds no terms and returns (or finds the
// next term's, and serves it). s.mu is held.
func (s *scheduler) idle() {
	if s.armed && s.timer.Stop() {
		s.armed = false
		s.rt.wg.Done()
	}
	if s.watching == watchRunning {
		s.waker.Stop() // its goroutine returns
		s.waker = nil
	}
	s.watching = watchOff
}

// wake makes dispatch run at at (a reading of clock.Now; the zero Time for
// at once), unless it runs sooner. s.mu is held.
func (s *scheduler) wake(at time.Time) {
	if s.timer == nil {
		s.timer = time.AfterFunc(time.Hour, s.dispatch)
		s.timer.Stop()
	}
	if s.armed {
		if !at.Before(s.timerAt) || !s.timer.Stop() {
			return // due no sooner, or dispatch is starting, and will plan from the terms as they are
		}
	} else {
		s.armed = true
		s.rt.wg.Add(1)
	}
	s.timerAt = at
	s.timer.Reset(max(at.Sub(s.rt.clock.Now()), 0))
}

// lateAt returns the instant by which, but for a suspend, t has renewed.
// s.mu is held.
func (s *scheduler) lateAt(t *leaseTerm) time.Time {
	late := t.next.Add(t.renewEvery)
	if until := t.trustEnd(); until.Before(late) {
		return until
	}
	return late
}

// dispatch queues the renewals due (see scheduler) and starts the resume
// watch when it is time, and has the timer run it again when the next is
// due.
func (s *scheduler) dispatch() {
	defer s.rt.wg.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = false
	if len(s.terms) == 0 {
		return
	}
	now := s.rt.clock.Now()
	if s.watching == watchPending {
		if now.Before(s.watchAt) {
			s.wake(s.watchAt)
		} else {
			s.waker = s.rt.clock.NewWaker()
			s.watching, s.wakeAt = watchRunning, time.Time{}
			s.rt.wg.Add(1)
			go s.watchResumes(s.waker, s.slept)
		}
	}
	soonest, every := s.soonest()
	if soonest.IsZero() {
		return // all in flight: each return wakes it
	}
	if soonest.After(now) {
		s.wake(soonest)
		return
	}
	var due []*leaseTerm
	for t := range s.terms {
		if t.inFlight == nil && !t.next.After(now.Add(t.renewEvery/4)) {
			t.inFlight = make(chan struct{})
			due = append(due, t)
		}
	}
	if s.batch == nil {
		for _, t := range due {
			s.queue = append(s.queue, renewal{[]*leaseTerm{t}, every})
		}
	} else {
		for len(due) > 0 {
			n := min(len(due), maxBatch)
			s.queue = append(s.queue, renewal{due[:n:n], every})
			due = due[n:]
		}
	}
	for s.workers < renewWorkers && s.workers-s.busy < len(s.queue) {
		s.workers++
		s.rt.wg.Add(1)
		go s.work()
	}
	if soonest, _ = s.soonest(); !soonest.IsZero() {
		s.wake(soonest)
	}
}

// soonest returns when the soonest term not in flight is due (zero if
// none), and the least RenewInterval among the terms. s.mu is held.
func (s *scheduler) soonest() (soonest time.Time, every time.Duration) {
	for t := range s.terms {
		if t.inFlight == nil && (soonest.IsZero() || t.next.Before(soonest)) {
			soonest = t.next
		}
		if every == 0 || t.renewEvery < every {
			every = t.renewEvery
		}
	}
	return soonest, every
}

// work runs queued renewals until the queue is empty.
func (s *scheduler) work() {
	defer s.rt.wg.Done()
	for done := false; ; done = true {
		s.mu.Lock()
		if done {
			s.busy--
		}
		if len(s.queue) == 0 {
			s.workers--
			s.mu.Unlock()
			return
		}
		job := s.queue[0]
		s.queue[0] = renewal{}
		s.queue = s.queue[1:]
		s.busy++
		s.mu.Unlock()
		s.renew(job)
	}
}

// renew renews the terms of one job in one store call.
func (s *scheduler) renew(job renewal) {
	start := s.rt.clock.Now()
	terms := make([]*leaseTerm, 0, len(job.terms))
	bound := job.every
	for _, t := range job.terms {
		trust := t.trustEnd().Sub(s.rt.clock.Now())
		if t.Err() != nil || trust <= 0 {
			s.settle(t, time.Time{})
			t.expire() // a suspend delayed its timer
			continue
		}
		terms = append(terms, t)
		bound = min(bound, trust)
	}
	if len(terms) == 0 {
		return
	}
	if s.batch == nil {
		t := terms[0]
		// One attempt never takes the whole window: a call stuck on a
		// dead connection leaves time to retry on another.
		ctx, cancel := context.WithTimeout(t.ctx, bound)
		l, err := s.rt.store.Renew(ctx, t.Lease(), t.ttl)
		cancel()
		s.renewed(t, start, l, err)
		return
	}
	leases := make([]Lease, len(terms))
	for i, t := range terms {
		leases[i] = t.Lease()
		leases[i].TTL = t.ttl
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	got, err := s.batch.RenewMany(ctx, leases)
	cancel()
	if len(got) != len(terms) {
		if err == nil {
			err = fmt.Errorf("elector: %T.RenewMany returned %d leases for %d terms", s.rt.store, len(got), len(terms))
		}
		got = nil
	}
	for i, t := range terms {
		var l Lease
		terr := err
		if got != nil {
			switch l = got[i]; {
			case l.Token == 0 && err == nil:
				terr = fmt.Errorf("renew lease %q token %d: %w", leases[i].Name, leases[i].Token, ErrLeaseLost)
			case l.Token == 0:
				// Not renewed by a call that failed: err stands.
			case l.Name != leases[i].Name || l.Token != leases[i].Token:
				// Another lease's result: it must not extend this term.
				terr = fmt.Errorf("elector: %T.RenewMany returned lease %q token %d for lease %q token %d", s.rt.store, l.Name, l.Token, leases[i].Name, leases[i].Token)
			default:
				terr = nil // renewed, even if another term of the call failed
			}
		}
		s.renewed(t, start, l, terr)
	}
}

// renewed records the outcome of t's renewal that started at start.
func (s *scheduler) renewed(t *leaseTerm, start time.Time, l Lease, err error) {
	end := s.rt.clock.Now()
	next := t.renewedAt(start, end, l, err)
	s.settle(t, next)
}

// settle ends t's renewal in flight and schedules the next at next (if
// nonzero).
func (s *scheduler) settle(t *leaseTerm, next time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !next.IsZero() {
		if until := t.trustEnd(); until.Before(next) {
			next = until
		}
		t.next = next
	}
	close(t.inFlight)
	t.inFlight = nil
	if _, ok := s.terms[t]; ok && !next.IsZero() {
		s.wake(next)
	}
}

// watchResumes is the resume watch (see scheduler) while waker runs:
// dispatch starts it resumeWatchDelay after the first term's acquire, and
// it returns once the last term has gone. slept is clock.SuspendedSoFar
// when the first term came.
func (s *scheduler) watchResumes(waker clock.Waker, slept time.Duration) {
	defer s.rt.wg.Done()
	for {
		if now := s.rt.clock.Suspended(); now != slept {
			slept = now
			for _, t := range s.held() {
				t.resumed()
			}
			s.mu.Lock()
			if len(s.terms) > 0 {
				s.wake(time.Time{}) // at once: the suspend delayed the timer, past when it was due
			}
			s.mu.Unlock()
		}
		s.setWaker(waker)
		if !waker.Wait() {
			return
		}
	}
}

// held returns the scheduled terms.
func (s *scheduler) held() []*leaseTerm {
	s.mu.Lock()
	defer s.mu.Unlock()
	terms := make([]*leaseTerm, 0, len(s.terms))
	for t := range s.terms {
		terms = append(terms, t)
	}
	return terms
}

// setWaker sets waker to the earliest late instant of the terms, or
// resumeRecheck from now if that is sooner. Late instants only move
// forward, so one that a term sets later never comes before it. Once the
// last term has gone (and stopped the Waker) it does nothing.
func (s *scheduler) setWaker(waker clock.Waker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waker != waker {
		return
	}
	var next time.Time
	for t := range s.terms {
		if late := s.lateAt(t); next.IsZero() || late.Before(next) {
			next = late
		}
	}
	if floor := s.rt.clock.Now().Add(resumeRecheck); next.Before(floor) {
		next = floor
	}
	s.wakeAt = next
	waker.Set(next)
}
