package sqlitelease

import (
	"math"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// Conversions between durations and the whole milliseconds that SQLite
// keeps. They round up, so that a stored TTL or timeout is never shorter
// than the one given, and saturate instead of wrapping.

// maxTTLMillis is [elector.MaxTTL] in milliseconds.
const maxTTLMillis = int64(elector.MaxTTL / time.Millisecond)

// millisUp returns d (not negative) in whole milliseconds, rounded up. It
// cannot overflow: the largest Duration is about 9.2e12 ms.
func millisUp(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond > 0 {
		ms++
	}
	return ms
}

// fromMillis returns ms milliseconds as a Duration, saturating at the
// largest and smallest Duration.
func fromMillis(ms int64) time.Duration {
	const limit = math.MaxInt64 / int64(time.Millisecond)
	switch {
	case ms > limit:
		return math.MaxInt64
	case ms < -limit:
		return math.MinInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// busyMillis returns the busy_timeout pragma's value for d: milliseconds,
// rounded up, at most math.MaxInt32, because SQLite reads the pragma as a
// 32-bit int and takes a larger value as 0 (report busy at once).
func busyMillis(d time.Duration) int64 {
	return min(millisUp(d), math.MaxInt32)
}

// sqlInt returns u as an SQLite integer. A u above math.MaxInt64 cannot be a
// token or version the store issued; it becomes -1, which no row has.
func sqlInt(u uint64) int64 {
	if u > math.MaxInt64 {
		return -1
	}
	return int64(u)
}
