package pglease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/internal/testing/pgtest"
)

// envDSN names the environment variable with the test server's DSN.
const envDSN = "LEADERAWARE_TEST_PG"

// testDSN returns the test server's DSN, or skips t.
func testDSN(t testing.TB) string { return pgtest.DSN(t) }

// dsnWith returns the test server's DSN with the setting key=value.
func dsnWith(t testing.TB, key, value string) string {
	t.Helper()
	return pgtest.WithParam(testDSN(t), key, value)
}

// testCtx is t's context with a bound, so that a hung server fails the test
// instead of hanging it.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// unique returns prefix with a random suffix: names that no earlier run of
// the tests used, in a database that outlives them.
func unique(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// rawConn is a connection of the test's own, outside any store, closed at
// cleanup.
func rawConn(t testing.TB) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(testCtx(t), testDSN(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// freshSchema returns the name of a schema that does not exist yet and is
// dropped, with everything in it, when t ends.
func freshSchema(t testing.TB) string { return pgtest.Schema(t, testDSN(t), "pglease_test_") }

// openStore opens a store on the test server and closes it when t ends.
func openStore(t testing.TB, opts ...Option) *Store {
	t.Helper()
	s, err := Open(testCtx(t), testDSN(t), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// waitFor polls cond every 5ms until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitListening waits until s's listener has completed n LISTENs.
func waitListening(t testing.TB, s *Store, n int64) {
	t.Helper()
	waitFor(t, 10*time.Second, fmt.Sprintf("listener session %d", n), func() bool {
		s.mu.Lock()
		l := s.listener
		s.mu.Unlock()
		return l != nil && l.sessions.Load() >= n
	})
}

// drain empties ch.
func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// woken reports whether ch receives within d.
func woken(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}
