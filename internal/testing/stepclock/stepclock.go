// Package stepclock is a clock.Clock for tests and the chaos tests' helper
// process: the system's clocks, whose wall clock a test can step, as an NTP
// step would, and whose elapsed-time clock it can advance, as a suspend of
// the machine would. Give it to a store (its WithClock option); the
// elector's runtime for that store reads it too.
package stepclock

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderaware/leaderaware/internal/clock"
)

// Clock is clock.System plus a step of the wall clock and a simulated
// suspend. The zero Clock is ready to use; its methods are safe for
// concurrent use.
type Clock struct {
	step  atomic.Int64 // added to the wall clock (Step)
	slept atomic.Int64 // added to the elapsed clock (Suspend)

	mu     sync.Mutex
	wakers map[*waker]struct{} // not stopped yet, which Suspend wakes
}

// New returns a Clock that reads as clock.System until stepped or suspended.
func New() *Clock { return &Clock{} }

var _ clock.Clock = (*Clock)(nil)

func (c *Clock) Now() time.Time { return clock.Now().Add(c.suspended()) }

func (c *Clock) Suspended() time.Duration { return clock.Suspended() + c.suspended() }

func (c *Clock) SuspendedSoFar() time.Duration { return clock.SuspendedSoFar() + c.suspended() }

func (c *Clock) Wall() time.Time { return clock.Wall().Add(time.Duration(c.step.Load())) }

func (c *Clock) suspended() time.Duration { return time.Duration(c.slept.Load()) }

// Step moves the wall clock by d, as an NTP step would.
func (c *Clock) Step(d time.Duration) { c.step.Add(int64(d)) }

// Suspend advances the elapsed-time clock by d without moving Go's
// monotonic clock, as a suspend of the machine would: timers fire late,
// readings of Now jump, and every Waker of c wakes, as on a resume.
func (c *Clock) Suspend(d time.Duration) {
	c.slept.Add(int64(d))
	c.mu.Lock()
	defer c.mu.Unlock()
	for w := range c.wakers {
		w.woken.Store(true)
		w.inner.Set(time.Time{}) // a deadline passed: it fires at once
	}
}

// NewWaker returns a Waker on c's elapsed clock: clock.System's, with its
// deadlines moved by the suspend simulated so far.
func (c *Clock) NewWaker() clock.Waker {
	w := &waker{c: c, inner: clock.NewWaker()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wakers == nil {
		c.wakers = map[*waker]struct{}{}
	}
	c.wakers[w] = struct{}{}
	return w
}

type waker struct {
	c     *Clock
	inner clock.Waker
	woken atomic.Bool // by a Suspend, until Wait returns
}

// Set sets the system Waker's deadline to the instant of the system's
// elapsed clock at which c's reaches deadline; after a Suspend that Wait
// has not returned for, it keeps the deadline passed.
func (w *waker) Set(deadline time.Time) {
	if w.woken.Load() {
		deadline = time.Time{}
	}
	w.inner.Set(deadline.Add(-w.c.suspended()))
}

func (w *waker) Wait() bool {
	ok := w.inner.Wait()
	w.woken.Store(false)
	return ok
}

func (w *waker) Stop() {
	w.c.mu.Lock()
	delete(w.c.wakers, w)
	w.c.mu.Unlock()
	w.inner.Stop()
}
