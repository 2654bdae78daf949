package pglease

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// TestOptionsRefuseBadNames proves that bad identifiers are refused before
// anything connects, with an error naming the value.
func TestOptionsRefuseBadNames(t *testing.T) {
	long := strings.Repeat("x", 56)
	for _, tt := range []struct {
		opt  Option
		want string
	}{
		{WithSchema(""), "schema name is empty"},
		{WithTable(""), "table name is empty"},
		{WithTable(long), long},
		{WithSchema(strings.Repeat("s", 64)), "at most 63"},
		{WithTable("nul\x00"), "NUL"},
	} {
		_, err := Open(context.Background(), "postgres://nobody@127.0.0.1:1/none", tt.opt)
		require.Error(t, err, "want an error containing %q", tt.want)
		assert.Contains(t, err.Error(), tt.want)
	}
}

func TestChannelName(t *testing.T) {
	assert.Equal(t, "leaderaware:public.leaderaware_leases", channelName(DefaultSchema, DefaultTable))
	long := channelName(strings.Repeat("s", 63), strings.Repeat("t", 55))
	assert.LessOrEqual(t, len(long), maxIdentLen)
	assert.NotEqual(t, long, channelName(strings.Repeat("s", 63), strings.Repeat("u", 55)))
}

// TestMicros proves that durations convert to and from PostgreSQL's
// microseconds rounded up (a TTL never shrinks) and without overflow at
// the ends of time.Duration: math.MaxInt64 once wrapped to a negative TTL.
func TestMicros(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want int64
	}{
		{1, 1},
		{1000, 1},
		{1001, 2},
		{15e9, 15_000_000},
		{elector.MaxTTL, int64(elector.MaxTTL / time.Microsecond)},
		{math.MaxInt64, math.MaxInt64/1000 + 1},
		{0, 0},
		{-1, 0},
		{-1001, -1},
		{math.MinInt64, math.MinInt64 / 1000},
	} {
		assert.Equal(t, tt.want, micros(tt.d), "micros(%d)", int64(tt.d))
	}
	for _, tt := range []struct {
		us   int64
		want time.Duration
	}{
		{1, time.Microsecond},
		{micros(elector.MaxTTL), elector.MaxTTL},
		{math.MaxInt64 / 1000, math.MaxInt64 / 1000 * 1000},
		{math.MaxInt64/1000 + 1, math.MaxInt64},
		{math.MaxInt64, math.MaxInt64},
		{math.MinInt64, math.MinInt64},
	} {
		assert.Equal(t, tt.want, fromMicros(tt.us), "fromMicros(%d)", tt.us)
	}
	assert.Equal(t, time.Duration(math.MaxInt64), fromMicros(micros(math.MaxInt64)), "a round trip of the longest duration saturates")
}
