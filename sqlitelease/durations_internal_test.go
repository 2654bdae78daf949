package sqlitelease

import (
	"math"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

func TestMillisUp(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{
		{time.Nanosecond, 1}, // rounded up: a candidate never watches for less
		{time.Millisecond, 1},
		{1500 * time.Microsecond, 2},
		{elector.MaxTTL, maxTTLMillis},
		{math.MaxInt64, math.MaxInt64/int64(time.Millisecond) + 1}, // no overflow
	} {
		if got := millisUp(tc.d); got != tc.want {
			t.Errorf("millisUp(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

func TestFromMillis(t *testing.T) {
	for _, tc := range []struct {
		ms   int64
		want time.Duration
	}{
		{1, time.Millisecond},
		{maxTTLMillis, elector.MaxTTL},
		{math.MaxInt64 / int64(time.Millisecond), math.MaxInt64 / time.Millisecond * time.Millisecond},
		{math.MaxInt64/int64(time.Millisecond) + 1, math.MaxInt64}, // saturated, not wrapped
		{math.MaxInt64, math.MaxInt64},
		{math.MinInt64, math.MinInt64},
	} {
		if got := fromMillis(tc.ms); got != tc.want {
			t.Errorf("fromMillis(%d) = %v, want %v", tc.ms, got, tc.want)
		}
	}
}

func TestBusyMillis(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{
		{0, 0},
		{500 * time.Microsecond, 1}, // not 0, which would mean "report busy at once"
		{5 * time.Second, 5000},
		{1000 * time.Hour, math.MaxInt32}, // SQLite reads a 32-bit int
		{math.MaxInt64, math.MaxInt32},
	} {
		if got := busyMillis(tc.d); got != tc.want {
			t.Errorf("busyMillis(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

func TestSQLInt(t *testing.T) {
	if got := sqlInt(math.MaxInt64); got != math.MaxInt64 {
		t.Errorf("sqlInt(MaxInt64) = %d", got)
	}
	if got := sqlInt(math.MaxInt64 + 1); got != -1 {
		t.Errorf("sqlInt(MaxInt64+1) = %d, want -1 (matches no row)", got)
	}
}
