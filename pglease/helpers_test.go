package pglease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
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

// notified is what a Notify subscription of a Store reported.
type notified chan elector.Change

// notifyOf subscribes to s's Notify until t ends.
func notifyOf(t testing.TB, s *Store) notified {
	n := make(notified, 1000)
	stop := s.Notify(func(c elector.Change) {
		select {
		case n <- c:
		default:
			t.Error("the test's buffer of changes is full")
		}
	})
	t.Cleanup(stop)
	return n
}

// await reports whether a change that match accepts arrives within d,
// skipping others.
func (n notified) await(d time.Duration, match func(elector.Change) bool) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case c := <-n:
			if match(c) {
				return true
			}
		case <-timer.C:
			return false
		}
	}
}

// listening waits until the listener (re)connected: it then asks for every
// lease to be read again.
func (n notified) listening(t testing.TB) {
	t.Helper()
	require.True(t, n.await(10*time.Second, isReread), "the listener did not connect within 10s")
}

// isReread reports whether c asks to read every lease again.
func isReread(c elector.Change) bool { return c == elector.Change{} }

// isFreed returns a matcher of the Change that reports name released.
func isFreed(name string) func(elector.Change) bool {
	return func(c elector.Change) bool { return c == freed(name) }
}
