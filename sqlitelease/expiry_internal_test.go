package sqlitelease

import (
	"math"
	"testing"
	"time"
)

func TestExpiry(t *testing.T) {
	for _, tc := range []struct {
		now  int64
		ttl  time.Duration
		want int64
	}{
		{1000, time.Second, 2000},
		{1000, time.Nanosecond, 1001}, // rounded up: never already expired
		{1000, 1500 * time.Microsecond, 1002},
		{1000, math.MaxInt64, 1000 + math.MaxInt64/int64(time.Millisecond) + 1},
		{math.MaxInt64 - 10, time.Second, math.MaxInt64}, // capped, not overflowed
	} {
		if got := expiry(tc.now, tc.ttl); got != tc.want {
			t.Errorf("expiry(%d, %v) = %d, want %d", tc.now, tc.ttl, got, tc.want)
		}
	}
}
