// Package jobconfig holds the checks that jobs.Every and the reference jobs'
// Config types share, so that each value is checked one way with one message.
package jobconfig

import (
	"fmt"
	"math"
	"time"
)

// ValidJitter reports whether f is a jitter fraction: in [0, 1).
func ValidJitter(f float64) bool { return !math.IsNaN(f) && f >= 0 && f < 1 }

// Jitter returns an error naming pkg and f if f is not a valid jitter
// fraction.
func Jitter(pkg string, f float64) error {
	if !ValidJitter(f) {
		return fmt.Errorf("%s: Jitter %v is not in [0, 1)", pkg, f)
	}
	return nil
}

// Duration sets *d to def when it is zero, and returns an error naming pkg,
// field and the value when it is negative.
func Duration(pkg, field string, d *time.Duration, def time.Duration) error {
	if *d < 0 {
		return fmt.Errorf("%s: %s %v is negative", pkg, field, *d)
	}
	if *d == 0 {
		*d = def
	}
	return nil
}
