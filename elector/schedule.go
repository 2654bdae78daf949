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

// scheduler renews every term held through one Store.
//
// How it works: each term is due RenewInterval after the start of its last
// successful acquire or renew (RenewInterval/4 after the end of a failed
// renewal). One loop sleeps until the soonest term is due; then it takes
// that term and every other term due within a quarter of its own
// RenewInterval, so a term renews at most that much early, and queues them:
// in chunks of up to maxBatch for one RenewMany each when the Store is a
// BatchRenewer, else one Renew each. Up to renewWorkers goroutines run the
// queue, so a hung call delays no other term's renewal; each call is
// bounded by the least RenewInterval among the Store's terms when it was
// queued and by its own terms' trust left, so that calls that hang, as many
// as there are workers, free one for any term in time. A term's trust window
// is closed by its own timer (expiry), never by the loop.
//
// Go's timers stop during a suspend, while the trust window (clock.Now)
// counts it, so the resume watch, one goroutine while there are terms,
// waits on a clock.Waker (a CLOCK_BOOTTIME timerfd in production) set to
// the earliest instant by which some term's renewal must have happened (its
// late instant: next due plus RenewInterval, or its trust end if sooner).
// Without a suspend every term renews before that, so it wakes about once
// per RenewInterval; a suspend that passes it wakes it on the resume. When
// clock.Suspended has changed it ends each term whose window closed,
// re-arms the others' expiry timers and wakes the loop.
type scheduler struct {
	rt    *storeRuntime
	batch BatchRenewer // the Store's, or nil
	kick  chan struct{}

	mu      sync.Mutex
	terms   map[*leaseTerm]struct{}
	looping bool
	queue   []renewal
	workers int // running work; busy of them are in a store call
	busy    int
	waker   clock.Waker // the resume watch's, while there are terms
	wakeAt  time.Time   // the Waker's deadline
}

// renewal is one queued store call: the terms it renews, and the least
// RenewInterval among the Store's terms when it was queued.
type renewal struct {
	terms []*leaseTerm
	every time.Duration
}

func (s *scheduler) init(rt *storeRuntime) {
	s.rt = rt
	s.batch, _ = rt.store.(BatchRenewer)
	s.kick = make(chan struct{}, 1)
	s.terms = map[*leaseTerm]struct{}{}
}

// add schedules t's first renewal at next, unless t has ended already.
func (s *scheduler) add(t *leaseTerm, next time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.Err() != nil {
		return
	}
	t.next = next
	s.terms[t] = struct{}{}
	if s.waker == nil {
		s.waker = s.rt.clock.NewWaker()
		s.wakeAt = time.Time{}
		s.rt.wg.Add(1)
		// Read before t's timers are armed: they count an earlier
		// suspend, and a later one shows as a change, as does one that
		// the reading, which may be a millisecond old, missed (a
		// change that finds every window open ends no term).
		go s.watchResumes(s.waker, s.rt.clock.SuspendedSoFar())
	}
	if late := s.lateAt(t); s.wakeAt.IsZero() || late.Before(s.wakeAt) {
		s.wakeAt = late
		s.waker.Set(late)
	}
	if !s.looping {
		s.looping = true
		s.rt.wg.Add(1)
		go s.loop()
	} else {
		kick(s.kick)
	}
}

// drop unschedules t, which has ended, and returns its renewal in flight
// (nil if none), which closes when the call returns.
func (s *scheduler) drop(t *leaseTerm) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.terms[t]; ok {
		delete(s.terms, t)
		if len(s.terms) == 0 {
			s.waker.Stop()
			s.waker = nil
		}
		kick(s.kick)
	}
	return t.inFlight
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

// loop queues renewals as they come due, until there are no terms.
func (s *scheduler) loop() {
	defer s.rt.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait, ok := s.dispatch()
		if !ok {
			return
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-s.kick:
		}
	}
}

// dispatch queues the renewals due (see scheduler) and returns how long
// until the next is due; false once there are no terms.
func (s *scheduler) dispatch() (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.terms) == 0 {
		s.looping = false
		return 0, false
	}
	now := s.rt.clock.Now()
	var soonest time.Time
	var every time.Duration
	for t := range s.terms {
		if t.inFlight == nil && (soonest.IsZero() || t.next.Before(soonest)) {
			soonest = t.next
		}
		if every == 0 || t.renewEvery < every {
			every = t.renewEvery
		}
	}
	if soonest.IsZero() {
		return time.Hour, true // all in flight; each return kicks the loop
	}
	if wait := soonest.Sub(now); wait > 0 {
		return wait, true
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
	return 0, true
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
		kick(s.kick)
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
}

// watchResumes is the resume watch (see scheduler) while waker runs.
// slept is clock.Suspended when it started.
func (s *scheduler) watchResumes(waker clock.Waker, slept time.Duration) {
	defer s.rt.wg.Done()
	for waker.Wait() {
		if now := s.rt.clock.Suspended(); now != slept {
			slept = now
			for _, t := range s.held() {
				t.resumed()
			}
			kick(s.kick)
		}
		s.setWaker(waker)
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
