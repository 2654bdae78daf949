package pglease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// fencedFixture is a store in a fresh schema with a table "writes" that
// fenced writes insert into.
type fencedFixture struct {
	s      *Store
	writes string // quoted, qualified
}

func newFencedFixture(t *testing.T) fencedFixture {
	schema := freshSchema(t)
	s := openStore(t, WithSchema(schema))
	writes := pgx.Identifier{schema, "writes"}.Sanitize()
	_, err := s.Pool().Exec(testCtx(t), "CREATE TABLE "+writes+" (token bigint NOT NULL)")
	require.NoError(t, err)
	return fencedFixture{s: s, writes: writes}
}

// write is a fenced write that records the token of l.
func (f fencedFixture) write(l elector.Lease, called *bool) func(ctx context.Context, tx pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		*called = true
		_, err := tx.Exec(ctx, "INSERT INTO "+f.writes+" (token) VALUES ($1)", int64(l.Token))
		return err
	}
}

func (f fencedFixture) count(t *testing.T) int {
	var n int
	require.NoError(t, f.s.Pool().QueryRow(testCtx(t), "SELECT count(*) FROM "+f.writes).Scan(&n))
	return n
}

// TestFencedCommitsWhenCurrent proves that the current term's write commits.
func TestFencedCommitsWhenCurrent(t *testing.T) {
	f := newFencedFixture(t)
	l, err := f.s.TryAcquire(testCtx(t), "fenced", "a", time.Minute)
	require.NoError(t, err)
	var called bool
	require.NoError(t, f.s.FencedLease(testCtx(t), l, f.write(l, &called)))
	assert.True(t, called)
	assert.Equal(t, 1, f.count(t))
}

// TestFencedRefusedAfterTakeover proves that a stale leader's write is
// refused with ErrLeaseLost, without running fn, once another holder took
// the lease.
func TestFencedRefusedAfterTakeover(t *testing.T) {
	f := newFencedFixture(t)
	old, err := f.s.TryAcquire(testCtx(t), "fenced", "a", 100*time.Millisecond)
	require.NoError(t, err)
	waitExpired(t, f.s, "fenced")
	_, err = f.s.TryAcquire(testCtx(t), "fenced", "b", time.Minute)
	require.NoError(t, err)
	var called bool
	err = f.s.FencedLease(testCtx(t), old, f.write(old, &called))
	require.ErrorIs(t, err, elector.ErrLeaseLost)
	assert.False(t, called, "fn must not run for a stale term")
	assert.Equal(t, 0, f.count(t), "nothing may be written")
}

// TestFencedRefusedAfterExpiry proves that an expired term cannot write,
// even when nobody took the lease.
func TestFencedRefusedAfterExpiry(t *testing.T) {
	f := newFencedFixture(t)
	l, err := f.s.TryAcquire(testCtx(t), "fenced", "a", 100*time.Millisecond)
	require.NoError(t, err)
	waitExpired(t, f.s, "fenced")
	var called bool
	err = f.s.FencedLease(testCtx(t), l, f.write(l, &called))
	require.ErrorIs(t, err, elector.ErrLeaseLost)
	assert.False(t, called)
	assert.Equal(t, 0, f.count(t))
}

// TestFencedFnErrorRollsBack proves that fn's error is returned as it is
// and its writes are rolled back.
func TestFencedFnErrorRollsBack(t *testing.T) {
	f := newFencedFixture(t)
	l, err := f.s.TryAcquire(testCtx(t), "fenced", "a", time.Minute)
	require.NoError(t, err)
	boom := errors.New("boom")
	err = f.s.FencedLease(testCtx(t), l, func(ctx context.Context, tx pgx.Tx) error {
		var called bool
		require.NoError(t, f.write(l, &called)(ctx, tx))
		return boom
	})
	require.Equal(t, boom, err)
	assert.Equal(t, 0, f.count(t))
}

// TestFencedHoldsOffTakeover proves the fence: while a fenced write is open,
// the lease cannot change hands, even if it expires meanwhile; a takeover is
// refused at once as held (it never waits on the row, so a candidate that
// gives up can never win later), and the write, having outlived its lease, is
// rolled back. Afterwards the expired lease is free.
func TestFencedHoldsOffTakeover(t *testing.T) {
	f := newFencedFixture(t)
	l, err := f.s.TryAcquire(testCtx(t), "fenced", "a", 300*time.Millisecond)
	require.NoError(t, err)
	var takeover error
	var took time.Duration
	err = f.s.FencedLease(testCtx(t), l, func(ctx context.Context, tx pgx.Tx) error {
		time.Sleep(400 * time.Millisecond) // the lease expires by the server's clock
		start := time.Now()
		_, takeover = f.s.TryAcquire(testCtx(t), "fenced", "b", time.Minute)
		took = time.Since(start)
		var called bool
		return f.write(l, &called)(ctx, tx)
	})
	require.ErrorIs(t, takeover, elector.ErrHeld, "a takeover of a row in a fenced write is refused")
	assert.Less(t, took, 5*time.Second, "the takeover must not wait for the fenced transaction")
	require.ErrorIs(t, err, elector.ErrLeaseLost, "a write that outlived its lease is refused")
	assert.Equal(t, 0, f.count(t), "nothing was written")
	b, err := f.s.TryAcquire(testCtx(t), "fenced", "b", time.Minute)
	require.NoError(t, err, "after the transaction the expired lease is free")
	assert.Greater(t, b.Token, l.Token)
}

// TestNoGhostAcquire: a candidate whose TryAcquire ended with an error never
// holds the lease afterwards.
func TestNoGhostAcquire(t *testing.T) {
	f := newFencedFixture(t)
	l, err := f.s.TryAcquire(testCtx(t), "fenced", "a", 200*time.Millisecond)
	require.NoError(t, err)
	err = f.s.FencedLease(testCtx(t), l, func(ctx context.Context, tx pgx.Tx) error {
		time.Sleep(300 * time.Millisecond)
		tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err := f.s.TryAcquire(tctx, "fenced", "b", time.Minute)
		require.Error(t, err)
		return nil
	})
	require.ErrorIs(t, err, elector.ErrLeaseLost)
	got, err := f.s.Get(testCtx(t), "fenced")
	if err == nil {
		t.Fatalf("candidate b gave up, yet the lease is held by %q (token %d)", got.Holder, got.Token)
	}
	require.ErrorIs(t, err, elector.ErrNoLease)
}

// TestFencedTermFromContext proves that Fenced takes the term from the
// context, refuses a context without one, and refuses a resigned term.
func TestFencedTermFromContext(t *testing.T) {
	f := newFencedFixture(t)
	var called bool
	err := f.s.Fenced(testCtx(t), f.write(elector.Lease{}, &called))
	require.ErrorIs(t, err, elector.ErrNoTerm)
	assert.False(t, called)

	e, err := elector.New(f.s, "fenced", elector.Config{TTL: 3 * time.Second, RetryInterval: time.Second})
	require.NoError(t, err)
	term, err := e.Campaign(testCtx(t))
	require.NoError(t, err)
	ctx := elector.ContextWithTerm(testCtx(t), term)
	l, ok := elector.LeaseFromContext(ctx)
	require.True(t, ok)
	require.NoError(t, f.s.Fenced(ctx, f.write(l, &called)))
	assert.True(t, called)
	require.NoError(t, term.Resign(testCtx(t)))

	called = false
	err = f.s.Fenced(ctx, f.write(l, &called))
	require.ErrorIs(t, err, elector.ErrLeaseLost)
	assert.False(t, called)
	assert.Equal(t, 1, f.count(t))
}
