//go:build !linux

package clock

import "time"

// sleptSinceStart is zero where no clock counts suspend: Go's monotonic
// clock alone measures elapsed time.
func sleptSinceStart(time.Time, bool) time.Duration { return 0 }
