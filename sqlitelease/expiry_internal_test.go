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
		{1000, time.Second, 2001},     // now was rounded down: up to 1 ms more
		{1000, time.Nanosecond, 1002}, // rounded up: never already expired
		{1000, 1500 * time.Microsecond, 1003},
		{1000, math.MaxInt64, 1000 + math.MaxInt64/int64(time.Millisecond) + 2},
		{math.MaxInt64 - 10, time.Second, math.MaxInt64}, // capped, not overflowed
	} {
		if got := expiry(tc.now, tc.ttl); got != tc.want {
			t.Errorf("expiry(%d, %v) = %d, want %d", tc.now, tc.ttl, got, tc.want)
		}
	}
}
