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
	"github.com/leaderaware/leaderaware/internal/clock"
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
	l, err := f.s.TryAcquire(testCtx(t), "fenced", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	var called bool
	require.NoError(t, f.s.FencedLease(testCtx(t), l, f.write(l, &called)))
	assert.True(t, called)
	assert.Equal(t, 1, f.count(t))
}

// TestFencedRefusedAfterTakeover proves that a stale leader's write is
// refused with ErrLeaseLost, without running fn, once another holder took
// the lease over.
func TestFencedRefusedAfterTakeover(t *testing.T) {
	f := newFencedFixture(t)
	old, err := f.s.TryAcquire(testCtx(t), "fenced", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	_, err = f.s.TryAcquire(testCtx(t), "fenced", "b", time.Minute, old)
	require.NoError(t, err)
	var called bool
	err = f.s.FencedLease(testCtx(t), old, f.write(old, &called))
	require.ErrorIs(t, err, elector.ErrLeaseLost)
	assert.False(t, called, "fn must not run for a stale term")
	assert.Equal(t, 0, f.count(t), "nothing may be written")
}

// TestFencedRefusedAfterRelease proves that a released term cannot write,
// even when nobody took the lease since.
func TestFencedRefusedAfterRelease(t *testing.T) {
	f := newFencedFixture(t)
	l, err := f.s.TryAcquire(testCtx(t), "fenced", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, f.s.Release(testCtx(t), l))
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
	l, err := f.s.TryAcquire(testCtx(t), "fenced", "a", time.Minute, elector.Lease{})
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
// a takeover of the lease (the candidate watched it) waits, and the write
// commits first; the takeover then succeeds with a larger token.
func TestFencedHoldsOffTakeover(t *testing.T) {
	f := newFencedFixture(t)
	l, err := f.s.TryAcquire(testCtx(t), "fenced", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	type result struct {
		l   elector.Lease
		err error
	}
	took := make(chan result, 1)
	bctx := testCtx(t)
	err = f.s.FencedLease(testCtx(t), l, func(ctx context.Context, tx pgx.Tx) error {
		go func() {
			b, err := f.s.TryAcquire(bctx, "fenced", "b", time.Minute, l)
			took <- result{b, err}
		}()
		time.Sleep(300 * time.Millisecond)
		assert.Empty(t, took, "the takeover returned during the fenced write")
		var called bool
		return f.write(l, &called)(ctx, tx)
	})
	require.NoError(t, err, "the write of the current term commits")
	assert.Equal(t, 1, f.count(t))
	r := <-took
	require.NoError(t, r.err, "after the write the takeover goes through")
	assert.Greater(t, r.l.Token, l.Token)
}

// TestHeldAnsweredDuringFencedWrite proves that a candidate that has not
// watched the lease is told at once that it is held, even while a fenced
// write holds the row, and that its TryAcquire never becomes a lease later.
func TestHeldAnsweredDuringFencedWrite(t *testing.T) {
	f := newFencedFixture(t)
	l, err := f.s.TryAcquire(testCtx(t), "fenced", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	err = f.s.FencedLease(testCtx(t), l, func(ctx context.Context, tx pgx.Tx) error {
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := f.s.TryAcquire(tctx, "fenced", "b", time.Minute, elector.Lease{})
		var held *elector.HeldError
		if assert.ErrorAs(t, err, &held) {
			assert.Equal(t, l.Token, held.Lease.Token)
			assert.Equal(t, l.Version, held.Lease.Version)
		}
		return nil
	})
	require.NoError(t, err)
	got, err := f.s.Get(testCtx(t), "fenced")
	require.NoError(t, err)
	assert.Equal(t, "a", got.Holder)
	assert.Equal(t, l.Version, got.Version)
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

// TestFrozenFencedWriteDoesNotBlockTakeover proves that a process frozen
// inside a fenced write (it holds the row FOR SHARE and sends nothing) does
// not hold off a takeover for the whole freeze: the server ends its
// transaction when the term's trust window closes, the candidate's takeover
// then goes through, and the frozen writer's commit fails.
func TestFrozenFencedWriteDoesNotBlockTakeover(t *testing.T) {
	f := newFencedFixture(t)
	const ttl = time.Second
	start := time.Now()
	l, err := f.s.TryAcquire(testCtx(t), "fenced", "a", ttl, elector.Lease{})
	require.NoError(t, err)
	written, thaw := make(chan struct{}), make(chan struct{})
	fenced := make(chan error, 1)
	actx := testCtx(t)
	go func() {
		fenced <- f.s.FencedLease(actx, l, func(ctx context.Context, tx pgx.Tx) error {
			var called bool
			if err := f.write(l, &called)(ctx, tx); err != nil {
				return err
			}
			close(written)
			<-thaw // frozen: no statement, deaf to ctx
			return nil
		})
	}()
	select {
	case <-written:
	case err := <-fenced:
		t.Fatalf("the fenced write ended before it froze: %v", err)
	}

	ctx, cancel := context.WithTimeout(testCtx(t), 5*time.Second)
	defer cancel()
	b, err := f.s.TryAcquire(ctx, "fenced", "b", time.Minute, l)
	took := time.Since(start)
	close(thaw)
	require.NoError(t, err, "the takeover must go through once the trust window of the frozen term closed")
	t.Logf("takeover %v after the acquire", took)
	assert.Less(t, took, ttl+time.Second, "the takeover waited for the frozen writer")
	assert.Greater(t, b.Token, l.Token)
	err = <-fenced
	require.ErrorIs(t, err, elector.ErrLeaseExpired, "the frozen writer's commit must fail")
	t.Log(err)
	assert.Equal(t, 0, f.count(t), "nothing of the frozen write may commit")
}

// TestFencedTrustWindow proves how long a fenced transaction may live: the
// server bounds its statements and idle waits by the trust the term has
// left, and a term whose window has closed is refused with ErrLeaseExpired
// (and ErrLeaseLost) before fn runs. A lease without a TTL is refused as bad
// input.
func TestFencedTrustWindow(t *testing.T) {
	f := newFencedFixture(t)
	l, err := f.s.TryAcquire(testCtx(t), "fenced", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	const trust = 5 * time.Second
	ctx := elector.ContextWithTerm(testCtx(t), fixedTerm{l: l, until: clock.Now().Add(trust)})
	var called bool
	require.NoError(t, f.s.Fenced(ctx, func(ctx context.Context, tx pgx.Tx) error {
		for _, setting := range []string{"statement_timeout", "idle_in_transaction_session_timeout"} {
			var ms int64
			require.NoError(t, tx.QueryRow(ctx, "SELECT (extract(epoch FROM current_setting($1)::interval) * 1000)::bigint", setting).Scan(&ms))
			assert.LessOrEqual(t, ms, trust.Milliseconds(), setting)
			assert.Greater(t, ms, (trust - time.Second).Milliseconds(), setting)
		}
		return f.write(l, &called)(ctx, tx)
	}))
	assert.True(t, called)
	assert.Equal(t, 1, f.count(t))

	called = false
	ctx = elector.ContextWithTerm(testCtx(t), fixedTerm{l: l, until: clock.Now()})
	err = f.s.Fenced(ctx, f.write(l, &called))
	require.ErrorIs(t, err, elector.ErrLeaseExpired)
	require.ErrorIs(t, err, elector.ErrLeaseLost)
	assert.False(t, called, "fn must not run once the trust window closed")

	noTTL := l
	noTTL.TTL = 0
	err = f.s.FencedLease(testCtx(t), noTTL, f.write(l, &called))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "TTL 0s")
	assert.False(t, called)
}
