package mysqllease

import (
	"database/sql"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/elector/electortest"
)

// TestStore runs the elector.Store conformance suite on Open's store, one
// table for the run.
func TestStore(t *testing.T) {
	table := freshTable(t)
	electortest.TestStore(t, func(t *testing.T) elector.Store {
		return openStore(t, table)
	})
}

// TestStoreNew runs the suite on New's store, which reserves its lease
// connections from the caller's pool.
func TestStoreNew(t *testing.T) {
	table := freshTable(t)
	db := rawDB(t)
	electortest.TestStore(t, func(t *testing.T) elector.Store {
		s, err := New(db, WithTable(table))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		return s
	})
}

// TestTokensIncreaseAfterTruncate: new tokens are floored at the server's
// clock, so deleting the rows or truncating the table never lowers them.
func TestTokensIncreaseAfterTruncate(t *testing.T) {
	s := openStore(t, "")
	db := rawDB(t)
	ctx := testCtx(t)
	name := "tokens"
	var last uint64
	for i, wipe := range []string{"", "TRUNCATE TABLE " + s.Table(), "DELETE FROM " + s.Table(), "TRUNCATE TABLE " + s.Table()} {
		if wipe != "" {
			_, err := db.ExecContext(ctx, wipe)
			require.NoError(t, err)
			_, err = s.Get(ctx, name)
			require.ErrorIs(t, err, elector.ErrNoLease, "after %s", wipe)
		}
		l, err := s.TryAcquire(ctx, name, "a", time.Minute, elector.Lease{})
		require.NoError(t, err, "round %d", i)
		assert.Greater(t, l.Token, last, "token after %q", wipe)
		last = l.Token
		l, err = s.TryAcquire(ctx, name, "b", time.Minute, l) // a takeover
		require.NoError(t, err)
		assert.Greater(t, l.Token, last)
		last = l.Token
	}
}

// TestStoredTTLSaturates: a ttl_us too large for a Duration reads as the
// longest Duration, not a wrapped one.
func TestStoredTTLSaturates(t *testing.T) {
	s := openStore(t, "")
	ctx := testCtx(t)
	l, err := s.TryAcquire(ctx, "huge", "a", elector.MaxTTL, elector.Lease{})
	require.NoError(t, err)
	assert.Equal(t, elector.MaxTTL, l.TTL)
	_, err = rawDB(t).ExecContext(ctx, "UPDATE "+s.Table()+" SET ttl_us = 18446744073709551615 WHERE name = 'huge'")
	require.NoError(t, err)
	got, err := s.Get(ctx, "huge")
	require.NoError(t, err)
	assert.Equal(t, time.Duration(math.MaxInt64), got.TTL)
}

func TestMicros(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want uint64
	}{
		{time.Nanosecond, 1}, {time.Microsecond, 1}, {time.Microsecond + 1, 2},
		{elector.MaxTTL, uint64(elector.MaxTTL / time.Microsecond)},
		{math.MaxInt64, math.MaxInt64/1000 + 1},
		{0, 0}, {-time.Second, 0},
	} {
		assert.Equal(t, c.want, micros(c.d), "micros(%v)", c.d)
	}
	assert.Equal(t, elector.MaxTTL, fromMicros(micros(elector.MaxTTL)))
	assert.Equal(t, time.Duration(math.MaxInt64), fromMicros(math.MaxUint64))
	assert.Equal(t, time.Duration(math.MaxInt64), fromMicros(math.MaxInt64/1000+1))
	assert.Equal(t, time.Duration(math.MaxInt64/1000*1000), fromMicros(math.MaxInt64/1000))
}

func TestClosed(t *testing.T) {
	s, err := Open(testCtx(t), testDSN(t), WithTable(freshTable(t)))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")
	ctx := testCtx(t)
	_, err = s.TryAcquire(ctx, "x", "a", time.Minute, elector.Lease{})
	assert.ErrorIs(t, err, ErrClosed)
	_, err = s.Get(ctx, "x")
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, s.Release(ctx, elector.Lease{Name: "x", Token: 1}), ErrClosed)
	_, err = s.GetMany(ctx, []string{"x"})
	assert.ErrorIs(t, err, ErrClosed)
	_, err = s.RenewMany(ctx, []elector.Lease{{Name: "x", Token: 1, TTL: time.Minute}})
	assert.ErrorIs(t, err, ErrClosed)
}

// TestWritesReturnWhatTheyWrote: every write is one statement whose result
// the store builds from what it sent and the statement's LAST_INSERT_ID
// (RenewMany included),
// without a read back. The lease it returns must be the row as Get reads
// it, on Open's pool (statements interpolated) and on a pool of New
// (prepared), with and without clientFoundRows (RowsAffected then counts
// matched rows, not changed ones).
func TestWritesReturnWhatTheyWrote(t *testing.T) {
	for _, foundRows := range []bool{false, true} {
		for _, viaNew := range []bool{false, true} {
			t.Run(fmt.Sprintf("clientFoundRows=%v/New=%v", foundRows, viaNew), func(t *testing.T) {
				cfg, err := mysql.ParseDSN(testDSN(t))
				require.NoError(t, err)
				cfg.ClientFoundRows = foundRows
				var s *Store
				if viaNew {
					db, err := sql.Open("mysql", cfg.FormatDSN())
					require.NoError(t, err)
					t.Cleanup(func() { _ = db.Close() })
					s, err = New(db, WithTable(freshTable(t)))
					require.NoError(t, err)
					t.Cleanup(func() { require.NoError(t, s.Close()) })
				} else {
					s = openStoreDSN(t, cfg.FormatDSN(), freshTable(t))
				}
				ctx := testCtx(t)
				same := func(what string, l elector.Lease) {
					t.Helper()
					got, err := s.Get(ctx, l.Name)
					require.NoError(t, err, what)
					assert.Equal(t, got, l, "%s returned another lease than it wrote", what)
				}
				before := time.Now()
				a, err := s.TryAcquire(ctx, "job", "a", 1500*time.Millisecond, elector.Lease{}) // INSERT
				require.NoError(t, err)
				same("acquire (insert)", a)
				assert.Equal(t, a.Token, a.Version, "a new row's version is its token, the server clock")
				assert.WithinDuration(t, before, a.Written, time.Minute)
				r, err := s.Renew(ctx, a, time.Minute+time.Nanosecond) // stored rounded up to µs
				require.NoError(t, err)
				same("renew", r)
				assert.Greater(t, r.Version, a.Version)
				many, err := s.RenewMany(ctx, []elector.Lease{r})
				require.NoError(t, err)
				same("renew many", many[0])
				assert.Greater(t, many[0].Version, r.Version)
				r = many[0]
				b, err := s.TryAcquire(ctx, "job", "b", time.Minute, r) // takeover: UPDATE
				require.NoError(t, err)
				same("takeover", b)
				assert.Greater(t, b.Token, r.Token)
				assert.Greater(t, b.Version, r.Version)
				_, err = s.Renew(ctx, r, time.Minute)
				require.ErrorIs(t, err, elector.ErrLeaseLost, "renewal of a term taken over")
				same("refused renewal", b)
				require.NoError(t, s.Release(ctx, b))
				c, err := s.TryAcquire(ctx, "job", "c", time.Minute, elector.Lease{}) // free: UPDATE
				require.NoError(t, err)
				same("acquire (released)", c)
				assert.Greater(t, c.Token, b.Token)
				assert.Greater(t, c.Version, b.Version+1, "the release wrote a version between")
				_, err = s.Renew(ctx, b, time.Minute)
				require.ErrorIs(t, err, elector.ErrLeaseLost, "renewal of a released term")
				d, err := s.TryAcquire(ctx, "job2", "d", time.Minute, elector.Lease{})
				require.NoError(t, err)
				require.NoError(t, s.Release(ctx, d))
				many, err = s.RenewMany(ctx, []elector.Lease{d, c})
				require.NoError(t, err)
				assert.Equal(t, elector.Lease{}, many[0], "batch renewal of a released term")
				same("renew many", many[1])
			})
		}
	}
}
