// Package clock reads the two clocks leaderaware uses: an elapsed-time clock
// that keeps counting while the machine is suspended, for trust windows and
// watches, and the wall clock, for display and token floors only; a [Waker]
// waits for a deadline on the elapsed clock. A [Clock] is a source of both:
// [System] in production; a store carries the one its tests chose (see
// [Carrier]), and the elector's runtime for that store reads it too.
package clock

import "time"

// A Clock reads the elapsed-time and wall clocks, and makes Wakers on the
// elapsed one. Its methods are safe for concurrent use.
type Clock interface {
	// Now returns the current instant of the elapsed-time clock.
	Now() time.Time
	// Suspended returns how long the machine has spent suspended since the
	// process started, read afresh: it changes only across a suspend.
	Suspended() time.Duration
	// SuspendedSoFar returns Suspended as Now reads it: a reading at most
	// a millisecond of running time old.
	SuspendedSoFar() time.Duration
	// Wall returns the wall-clock time, for display and token floors.
	Wall() time.Time
	// NewWaker returns a Waker with no deadline set; the caller must Stop it.
	NewWaker() Waker
}

// System is the machine's Clock: [Now], [Suspended], [SuspendedSoFar],
// [Wall] and [NewWaker].
type System struct{}

func (System) Now() time.Time                { return Now() }
func (System) Suspended() time.Duration      { return Suspended() }
func (System) SuspendedSoFar() time.Duration { return SuspendedSoFar() }
func (System) Wall() time.Time               { return Wall() }
func (System) NewWaker() Waker               { return NewWaker() }

// Now returns the current instant of the elapsed-time clock: Go's monotonic
// clock plus the time the machine has spent suspended since the process
// started (on Linux, CLOCK_BOOTTIME minus CLOCK_MONOTONIC). Compare its
// readings only with each other (Sub, Before, After); never with time.Now.
// Inside a testing/synctest bubble it runs on the bubble's fake time.
func Now() time.Time {
	now := time.Now()
	return now.Add(sleptSinceStart(now, false))
}

// Suspended returns how long the machine has spent suspended since the
// process started: what [Now] adds to Go's monotonic clock, read afresh (the
// readings of Now that follow see it too). It changes only across a
// suspend, so a change is a resume.
func Suspended() time.Duration { return sleptSinceStart(time.Now(), true) }

// SuspendedSoFar returns [Suspended] as [Now] reads it: a reading at most a
// millisecond of running time old, so it may miss a suspend that has just
// ended, never count one that has not happened, and costs no system call
// when read often. A baseline for [Suspended] taken so shows a suspend it
// missed as a change.
func SuspendedSoFar() time.Duration { return sleptSinceStart(time.Now(), false) }

// Wall returns the wall-clock time, for display and for token floors. It may
// step backwards or forwards; never measure a lease with it.
func Wall() time.Time { return time.Now().Round(0) }

// A Carrier, embedded in a store, carries the store's Clock to the
// elector's runtime for it (see [Of]). Only this module can name a Clock,
// so only its tests choose one other than System.
type Carrier struct{ c Clock }

// Carry returns a Carrier of c, or of System if c is nil.
func Carry(c Clock) Carrier {
	if c == nil {
		c = System{}
	}
	return Carrier{c}
}

// Clock returns the carried Clock: System for the zero Carrier.
func (c Carrier) Clock() Clock {
	if c.c == nil {
		return System{}
	}
	return c.c
}

// Of returns the Clock that store carries (it embeds a [Carrier], or has a
// Clock method like it), System otherwise.
func Of(store any) Clock {
	if c, ok := store.(interface{ Clock() Clock }); ok {
		return c.Clock()
	}
	return System{}
}
