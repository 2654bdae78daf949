package clock

import (
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

var (
	slept0 = slept() // the suspended time at process start
	start  = time.Now()
	// The last reading of slept, and when (time.Since(start)) it was taken:
	// reading the clocks costs two system calls, so a reading serves for a
	// millisecond of running time. A suspend shows at most that late.
	sampled, sampledAt atomic.Int64
)

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

// sleptSinceStart returns how long the machine has been suspended since
// the process started: a reading at most a millisecond of running time old,
// unless fresh.
func sleptSinceStart(fresh bool) time.Duration {
	now := int64(time.Since(start))
	if at := sampledAt.Load(); !fresh && at != 0 && now >= at && now-at < int64(time.Millisecond) {
		return time.Duration(sampled.Load())
	}
	s := slept() - slept0
	sampled.Store(int64(s))
	sampledAt.Store(now)
	return s
}
