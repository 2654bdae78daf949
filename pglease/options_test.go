package pglease

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOptionString(t *testing.T) {
	for _, tt := range []struct {
		opt  Option
		want string
	}{
		{WithSchema("s"), `pglease.WithSchema("s")`},
		{WithTable("t"), `pglease.WithTable("t")`},
		{WithApplicationName("app"), `pglease.WithApplicationName("app")`},
		{WithoutListener(), `pglease.WithoutListener()`},
		{WithLogger(slog.Default()), `pglease.WithLogger(...)`},
	} {
		assert.Equal(t, tt.want, tt.opt.String())
	}
}

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
		require.Error(t, err, "%v", tt.opt)
		assert.Contains(t, err.Error(), tt.want)
	}
}

func TestChannelName(t *testing.T) {
	assert.Equal(t, "leaderaware:public.leaderaware_leases", channelName(DefaultSchema, DefaultTable))
	long := channelName(strings.Repeat("s", 63), strings.Repeat("t", 55))
	assert.LessOrEqual(t, len(long), maxIdentLen)
	assert.NotEqual(t, long, channelName(strings.Repeat("s", 63), strings.Repeat("u", 55)))
}

func TestMicros(t *testing.T) {
	assert.EqualValues(t, 1, micros(1))
	assert.EqualValues(t, 1, micros(1000))
	assert.EqualValues(t, 2, micros(1001))
	assert.EqualValues(t, 15_000_000, micros(15e9))
}
