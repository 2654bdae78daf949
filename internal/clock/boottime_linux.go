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
	// reading the clocks costs three system calls, so a reading serves for a
	// millisecond of running time. A suspend shows at most that late.
	sampled, sampledAt atomic.Int64
)

// slept returns how long the machine has been suspended since boot:
// CLOCK_BOOTTIME counts suspend, CLOCK_MONOTONIC does not. It reads
// CLOCK_BOOTTIME between two readings of CLOCK_MONOTONIC, and again while
// those are far apart (the thread was preempted between the reads), and is
// rounded to the millisecond so that the skew between the reads never
// shows.
func slept() time.Duration {
	var best time.Duration
	spread := time.Duration(-1)
	for range 10 {
		var m1, boot, m2 unix.Timespec
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &m1) != nil || unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot) != nil || unix.ClockGettime(unix.CLOCK_MONOTONIC, &m2) != nil {
			return 0
		}
		d := time.Duration(m2.Nano() - m1.Nano())
		if spread < 0 || d < spread {
			spread, best = d, time.Duration(boot.Nano()-(m1.Nano()+m2.Nano())/2)
		}
		if spread <= 100*time.Microsecond {
			break
		}
	}
	return best.Round(time.Millisecond)
}

// sleptSinceStart returns how long the machine has been suspended since
// the process started, as of now (a time.Now reading): a reading at most a
// millisecond of running time old, unless fresh.
func sleptSinceStart(now time.Time, fresh bool) time.Duration {
	since := int64(now.Sub(start))
	if at := sampledAt.Load(); !fresh && at != 0 && since >= at && since-at < int64(time.Millisecond) {
		return time.Duration(sampled.Load())
	}
	s := steady(time.Duration(sampled.Load()), slept()-slept0)
	sampled.Store(int64(s))
	sampledAt.Store(since)
	return s
}

// sleptJitter is the largest change of slept that is not a suspend: the two
// clocks are read one after the other, so their rounded difference can flip
// by a millisecond or two between readings on a loaded machine (and would
// make Now step back); no suspend is that short.
const sleptJitter = 5 * time.Millisecond

// steady returns the suspended time s just read, or last, the one read
// before, if they differ by sleptJitter or less.
func steady(last, s time.Duration) time.Duration {
	if (s - last).Abs() <= sleptJitter {
		return last
	}
	return s
}
