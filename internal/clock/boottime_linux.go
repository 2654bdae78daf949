package clock

import (
	"time"

	"golang.org/x/sys/unix"
)

// slept0 is the suspended time at process start.
var slept0 = slept()

// slept returns how long the machine has been suspended since boot:
// CLOCK_BOOTTIME counts suspend, CLOCK_MONOTONIC does not. It is rounded to
// the millisecond so that the skew between the two reads never shows.
func slept() time.Duration {
	var boot, mono unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot) != nil || unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono) != nil {
		return 0
	}
	return time.Duration(boot.Nano() - mono.Nano()).Round(time.Millisecond)
}

func sleptSinceStart() time.Duration { return slept() - slept0 }
