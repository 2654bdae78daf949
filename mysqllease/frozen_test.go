package mysqllease

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// frozenTTL is the lease TTL of the frozen-peer tests.
const frozenTTL = time.Second

// TestFrozenHolderMidRenew: a holder that freezes (SIGSTOP, a paused VM)
// right after it sent its renewal's UPDATE holds no lock on the lease row,
// so a candidate that watches the lease takes it over after the TTL while
// the frozen session is still open on the server. (Were the renewal a
// transaction, the frozen session would keep the row locked until the
// server's wait_timeout, and no candidate could take over.)
func TestFrozenHolderMidRenew(t *testing.T) {
	table := freshTable(t)
	fz := newFreezer(t)
	holder := openStoreDSN(t, fz.dsn(t), table)
	cand := openStore(t, table)
	ctx := testCtx(t)
	l, err := holder.TryAcquire(ctx, "job", "a", frozenTTL, elector.Lease{})
	require.NoError(t, err)

	fz.arm("UPDATE " + holder.Table())
	rctx, cancel := context.WithTimeout(ctx, frozenTTL)
	_, err = holder.Renew(rctx, l, frozenTTL)
	cancel()
	require.Error(t, err, "the holder froze in its renewal, which cannot have returned")
	frozen := fz.frozen(t)

	term, took, lastErr := campaignFor(t, cand, "b", 5*frozenTTL)
	require.NotNil(t, term, "the candidate must lead within 5 TTLs of the holder's freeze; last campaign error: %v", lastErr)
	assert.GreaterOrEqual(t, took, frozenTTL, "the candidate must watch the lease for a whole TTL")
	assert.Greater(t, term.Token(), l.Token)
	require.NoError(t, term.Resign(ctx))
	assertFrozenHoldsNothing(t, frozen)
}

// TestFrozenCandidateMidTakeover: a candidate that freezes right after it
// sent its takeover holds no lock on the lease row either: the holder's
// renewal does not wait for it (it finds the lease taken), and another
// candidate takes the lease over from the frozen one after the TTL. (Were
// the takeover a transaction, the frozen session would keep the row locked
// until the server's wait_timeout: the holder's renewals would block and
// no one could take over.)
func TestFrozenCandidateMidTakeover(t *testing.T) {
	table := freshTable(t)
	fz := newFreezer(t)
	holder := openStore(t, table)
	frozenCand := openStoreDSN(t, fz.dsn(t), table)
	cand := openStore(t, table)
	ctx := testCtx(t)
	l, err := holder.TryAcquire(ctx, "job", "a", frozenTTL, elector.Lease{})
	require.NoError(t, err)

	// The frozen candidate watched l unchanged for its TTL (say, the holder
	// was slow to renew) and takes it over.
	fz.arm("UPDATE " + holder.Table())
	cctx, cancel := context.WithTimeout(ctx, frozenTTL)
	_, err = frozenCand.TryAcquire(cctx, "job", "c", frozenTTL, l)
	cancel()
	require.Error(t, err, "the candidate froze in its takeover, which cannot have returned")
	frozen := fz.frozen(t)

	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, 2*frozenTTL)
	_, err = holder.Renew(rctx, l, frozenTTL)
	cancel()
	assert.ErrorIs(t, err, elector.ErrLeaseLost, "the holder's renewal must not wait for the frozen candidate; its takeover went through")
	assert.Less(t, time.Since(start), frozenTTL/2, "the holder's renewal must return at once")

	term, took, lastErr := campaignFor(t, cand, "b", 5*frozenTTL)
	require.NotNil(t, term, "a candidate must lead within 5 TTLs of the other's freeze; last campaign error: %v", lastErr)
	assert.GreaterOrEqual(t, took, frozenTTL, "the candidate must watch the frozen one's lease for a whole TTL")
	assert.Greater(t, term.Token(), l.Token)
	require.NoError(t, term.Resign(ctx))
	assertFrozenHoldsNothing(t, frozen)
}

// campaignFor campaigns for the lease "job" on s as holder, with a fresh
// elector (it has watched nothing), for up to within, and returns the term
// and how long it took, or the last error of a campaign that ended before
// within.
func campaignFor(t *testing.T, s *Store, holder string, within time.Duration) (elector.Term, time.Duration, error) {
	t.Helper()
	e, err := elector.New(s, "job", elector.Config{
		TTL: frozenTTL, RenewInterval: frozenTTL / 4, RetryInterval: 100 * time.Millisecond, Holder: holder,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(testCtx(t), within)
	defer cancel()
	start := time.Now()
	var lastErr error
	for ctx.Err() == nil {
		term, err := e.Campaign(ctx)
		switch {
		case err == nil:
			return term, time.Since(start), nil
		case ctx.Err() == nil:
			lastErr = err
		}
	}
	return nil, time.Since(start), lastErr
}

// assertFrozenHoldsNothing checks that the frozen session is still open on
// the server (the test simulated a frozen process, not a dead one) and has
// no transaction open.
func assertFrozenHoldsNothing(t *testing.T, id uint32) {
	t.Helper()
	db, ctx := rawDB(t), testCtx(t)
	var open, trx int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?`, id).Scan(&open))
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ?`, id).Scan(&trx))
	assert.Equal(t, 1, open, "the frozen session %d must still be open on the server", id)
	assert.Equal(t, 0, trx, "the frozen session %d must hold no transaction", id)
}

// openStoreDSN opens a store on dsn and table and closes it when t ends.
func openStoreDSN(t testing.TB, dsn, table string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(testCtx(t), dsn, append([]Option{WithTable(table)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}
