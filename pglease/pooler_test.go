package pglease

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/pgtest"
)

// TestBehindTransactionPooler proves that stores work through PgBouncer in
// transaction mode, which hands each transaction whichever server
// connection is free: before, the second Open failed with `prepared
// statement "stmtcache_…" already exists (SQLSTATE 42P05)`. Each store
// switches its lease statements to pgx's cache_describe mode when it first
// meets such an error, at Open or later, and every lease operation runs,
// round after round; the store's statements on Pool, in
// the DSN's mode, fail with an error that names the setting that makes them
// work; and the listener, which can hear nothing there, says so once at
// Warn.
func TestBehindTransactionPooler(t *testing.T) {
	dsn := pgtest.Bouncer(t, testDSN(t))
	schema := freshSchema(t)
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	a, err := Open(testCtx(t), dsn, WithSchema(schema), WithLogger(logger))
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	b, err := Open(testCtx(t), dsn, WithSchema(schema), WithLogger(logger))
	require.NoError(t, err, "a second Open through the pooler")
	t.Cleanup(func() { _ = b.Close() })
	b.listenKeepAlive = 300 * time.Millisecond
	notifyOf(t, b)
	assert.True(t, b.pooled.Load(), "b met a's statements at Open")

	// The pooler's one server connection loses the statement a prepared:
	// a meets the error later, switches, and runs the statement again.
	_, err = a.Get(testCtx(t), "job")
	require.ErrorIs(t, err, elector.ErrNoLease)
	raw, err := pgx.Connect(testCtx(t), dsn)
	require.NoError(t, err)
	_, err = raw.Exec(testCtx(t), "DEALLOCATE ALL")
	require.NoError(t, err)
	require.NoError(t, raw.Close(testCtx(t)))
	require.False(t, a.pooled.Load())
	_, err = a.Get(testCtx(t), "job")
	require.ErrorIs(t, err, elector.ErrNoLease, "a's Get after its statement was lost")
	assert.True(t, a.pooled.Load(), "a met its statement gone")

	for round := range 5 {
		holder, other := a, b
		if round%2 == 1 {
			holder, other = b, a
		}
		l, err := holder.TryAcquire(testCtx(t), "job", "h", time.Minute, elector.Lease{})
		require.NoError(t, err, "round %d: acquire", round)
		_, err = other.TryAcquire(testCtx(t), "job", "o", time.Minute, elector.Lease{})
		require.ErrorIs(t, err, elector.ErrHeld, "round %d", round)
		for range 3 {
			l, err = holder.Renew(testCtx(t), l, time.Minute)
			require.NoError(t, err, "round %d: renew", round)
		}
		got, err := other.Get(testCtx(t), "job")
		require.NoError(t, err, "round %d: get", round)
		assert.Equal(t, l.Version, got.Version, "round %d", round)
		require.NoError(t, holder.Release(testCtx(t), l), "round %d: release", round)
	}

	// The store's own statements on Pool run in the DSN's mode: pgx's
	// default fails there, and the error says what to set.
	fence := func(s *Store) error {
		l, err := s.TryAcquire(testCtx(t), "fenced", "h", time.Minute, elector.Lease{})
		require.NoError(t, err)
		defer func() { require.NoError(t, s.Release(testCtx(t), l)) }()
		return s.FencedLease(testCtx(t), l, func(context.Context, pgx.Tx) error { return nil })
	}
	require.NoError(t, fence(a), "the first fenced write prepares its statement")
	err = fence(b)
	require.Error(t, err, "the second finds it prepared on the server connection they share")
	t.Log(err)
	assert.Contains(t, err.Error(), "default_query_exec_mode=cache_describe")
	c, err := Open(testCtx(t), pgtest.WithParam(dsn, "default_query_exec_mode", "cache_describe"), WithSchema(schema), WithoutListener())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	for range 3 {
		require.NoError(t, fence(c), "a fenced write with default_query_exec_mode=cache_describe")
		_, err := c.List(testCtx(t))
		require.NoError(t, err)
	}

	waitFor(t, 20*time.Second, "the listener's warning", func() bool {
		return strings.Contains(logs.String(), "hears no notifications")
	})
	time.Sleep(3 * b.listenKeepAlive) // more keepalive rounds: still one warning
	out := logs.String()
	t.Log(out)
	assert.Equal(t, 1, strings.Count(out, "hears no notifications"), "the warning is said once")
	assert.Contains(t, out, "level=WARN")
	assert.Contains(t, out, "WithoutListener")
}

// TestListenerHearsItsProbe proves that on a direct connection the
// listener hears the notification the store sends itself after LISTEN,
// and so warns of nothing.
func TestListenerHearsItsProbe(t *testing.T) {
	var logs syncBuffer
	s := openStore(t, WithSchema(freshSchema(t)), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	s.listenKeepAlive = 2 * time.Second
	notifyOf(t, s).listening(t)
	time.Sleep(2 * s.listenKeepAlive) // past the first keepalive, when a deaf listener warns
	assert.NotContains(t, logs.String(), "hears no notifications")
}
