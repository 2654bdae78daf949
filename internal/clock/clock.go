// Package clock reads the two clocks leaderaware uses: an elapsed-time clock
// that keeps counting while the machine is suspended, for trust windows and
// watches, and the wall clock, for display and token floors only; a [Waker]
// waits for a deadline on the elapsed clock. It is the one seam through which
// tests step the wall clock and simulate a suspend.
package clock

import (
	"sync/atomic"
	"time"
)

var (
	wallStep  atomic.Int64 // added to the wall clock (Step)
	suspended atomic.Int64 // added to the elapsed clock (Suspend)
)

// Now returns the current instant of the elapsed-time clock: Go's monotonic
// clock plus the time the machine has spent suspended since the process
// started (on Linux, CLOCK_BOOTTIME minus CLOCK_MONOTONIC). Compare its
// readings only with each other (Sub, Before, After); never with time.Now.
// Inside a testing/synctest bubble it runs on the bubble's fake time.
func Now() time.Time {
	now := time.Now()
	return now.Add(sleptSinceStart(now, false) + time.Duration(suspended.Load()))
}

// Suspended returns how long the machine has spent suspended since the
// process started: what [Now] adds to Go's monotonic clock, read afresh (the
// readings of Now that follow see it too). It changes only across a
// suspend, so a change is a resume.
func Suspended() time.Duration {
	return sleptSinceStart(time.Now(), true) + time.Duration(suspended.Load())
}

// SuspendedSoFar returns [Suspended] as [Now] reads it: a reading at most a
// millisecond of running time old, so it may miss a suspend that has just
// ended, never count one that has not happened, and costs no system call
// when read often. A baseline for [Suspended] taken so shows a suspend it
// missed as a change.
func SuspendedSoFar() time.Duration {
	return sleptSinceStart(time.Now(), false) + time.Duration(suspended.Load())
}

// Since returns the elapsed time since t, a reading of [Now].
func Since(t time.Time) time.Duration { return Now().Sub(t) }

// Until returns the elapsed time until t, a reading of [Now].
func Until(t time.Time) time.Duration { return t.Sub(Now()) }

// Wall returns the wall-clock time, for display and for token floors. It may
// step backwards or forwards; never measure a lease with it.
func Wall() time.Time {
	return time.Now().Round(0).Add(time.Duration(wallStep.Load()))
}

// Step moves the wall clock of this process by d, as an NTP step would.
// For tests.
func Step(d time.Duration) { wallStep.Add(int64(d)) }

// Suspend advances the elapsed-time clock of this process by d without
// moving Go's monotonic clock, as a suspend of the machine would: timers fire
// late, readings of [Now] jump, and every [Waker] wakes, as on a resume.
// For tests; those in synctest bubbles must not run in parallel with others
// that use Wakers.
func Suspend(d time.Duration) {
	suspended.Add(int64(d))
	wakeAll()
}
