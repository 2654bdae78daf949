package pglease

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/elector/electortest"
)

// TestStore runs the elector.Store conformance suite. Each run gets a fresh
// schema: electortest's lease names are unique per process, not per call, so
// with -count=2 the second run would find the first run's leases.
func TestStore(t *testing.T) {
	schema := freshSchema(t)
	electortest.TestStore(t, func(t *testing.T) elector.Store {
		return openStore(t, WithSchema(schema))
	})
}

// TestStoreDefaults proves that a store without options uses the table
// public.leaderaware_leases and names its backends "leaderaware". It opens
// the default table in a schema of its own, so as not to touch public.
func TestStoreDefaults(t *testing.T) {
	o, err := buildOptions(nil)
	require.NoError(t, err)
	assert.Equal(t, "public", o.schema)
	assert.Equal(t, "leaderaware_leases", o.table)

	schema := freshSchema(t)
	s := openStore(t, WithSchema(schema))
	assert.Equal(t, `"`+schema+`"."leaderaware_leases"`, s.Table())
	name := unique("pglease-default-")
	l, err := s.TryAcquire(testCtx(t), name, "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	for _, pool := range []*pgxpool.Pool{s.Pool(), s.leases} {
		var app string
		require.NoError(t, pool.QueryRow(testCtx(t), "SELECT current_setting('application_name')").Scan(&app))
		assert.Equal(t, DefaultApplicationName, app)
	}
	require.NoError(t, s.Release(testCtx(t), l))
}

// TestTTLLimits proves that the longest TTL the elector allows is stored
// and read back exactly, and that math.MaxInt64 (which once wrapped to a
// negative number of microseconds) is refused with an error naming it.
func TestTTLLimits(t *testing.T) {
	s := openStore(t, WithSchema(freshSchema(t)))
	l, err := s.TryAcquire(testCtx(t), "max", "a", elector.MaxTTL, elector.Lease{})
	require.NoError(t, err)
	assert.Equal(t, elector.MaxTTL, l.TTL)
	got, err := s.Get(testCtx(t), "max")
	require.NoError(t, err)
	assert.Equal(t, elector.MaxTTL, got.TTL)
	r, err := s.Renew(testCtx(t), l, elector.MaxTTL)
	require.NoError(t, err)
	assert.Equal(t, elector.MaxTTL, r.TTL)

	_, err = s.TryAcquire(testCtx(t), "huge", "a", math.MaxInt64, elector.Lease{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), time.Duration(math.MaxInt64).String())
	_, err = s.Renew(testCtx(t), r, math.MaxInt64)
	require.Error(t, err)
}

// TestTokensSurviveLostRows proves that a token is never reused or lowered
// even when the lease rows are lost: after a DELETE or a TRUNCATE of the
// lease table, the next term's token is larger than every earlier one.
func TestTokensSurviveLostRows(t *testing.T) {
	s := openStore(t, WithSchema(freshSchema(t)))
	conn := rawConn(t)
	var last uint64
	for _, lose := range []string{"DELETE FROM ", "TRUNCATE "} {
		for range 3 {
			l, err := s.TryAcquire(testCtx(t), "kept", "a", time.Minute, elector.Lease{})
			require.NoError(t, err)
			assert.Greater(t, l.Token, last, "after %s", lose)
			last = l.Token
			require.NoError(t, s.Release(testCtx(t), l))
		}
		_, err := conn.Exec(testCtx(t), lose+s.Table())
		require.NoError(t, err)
	}
	l, err := s.TryAcquire(testCtx(t), "kept", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	assert.Greater(t, l.Token, last, "after TRUNCATE")
}

// TestJobsDoNotStarveRenewals proves that lease operations do not wait for
// the job pool: with every connection of Pool() busy in a long query, a
// renewal and an acquire still succeed at once.
func TestJobsDoNotStarveRenewals(t *testing.T) {
	s, err := Open(testCtx(t), dsnWith(t, "pool_max_conns", "2"), WithSchema(freshSchema(t)))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	l, err := s.TryAcquire(testCtx(t), "busy", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)

	jobs, stopJobs := context.WithCancel(testCtx(t))
	var wg sync.WaitGroup
	defer func() { stopJobs(); wg.Wait() }()
	size := s.Pool().Config().MaxConns
	for range size {
		wg.Go(func() { _, _ = s.Pool().Exec(jobs, "SELECT pg_sleep(30)") })
	}
	waitFor(t, 10*time.Second, "job pool saturated", func() bool { return s.Pool().Stat().AcquiredConns() == size })

	ctx, cancel := context.WithTimeout(testCtx(t), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err = s.Renew(ctx, l, time.Minute)
	require.NoError(t, err, "a renewal must not wait for job queries")
	_, err = s.TryAcquire(ctx, "busy-2", "a", time.Minute, elector.Lease{})
	require.NoError(t, err, "an acquire must not wait for job queries")
	assert.Less(t, time.Since(start), time.Second)
}

// TestWaitingAcquireOnlyReads proves that a waiting candidate's TryAcquire
// (no observed lease) of a held lease is a plain read: it answers with the
// holder while another transaction holds the lease table in SHARE mode,
// which blocks every write to it. A statement that may write, even one that
// ends up changing nothing, waits for that lock, as the takeover does.
func TestWaitingAcquireOnlyReads(t *testing.T) {
	s := openStore(t, WithSchema(freshSchema(t)))
	held, err := s.TryAcquire(testCtx(t), "held", "leader", time.Minute, elector.Lease{})
	require.NoError(t, err)

	tx, err := rawConn(t).Begin(testCtx(t))
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(testCtx(t)) }()
	_, err = tx.Exec(testCtx(t), "LOCK TABLE "+s.Table()+" IN SHARE MODE")
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(testCtx(t), 5*time.Second)
	defer cancel()
	_, err = s.TryAcquire(ctx, "held", "candidate", time.Minute, elector.Lease{})
	var heldErr *elector.HeldError
	require.ErrorAs(t, err, &heldErr, "a held lease is answered without waiting for the table lock")
	assert.Equal(t, [3]any{held.Holder, held.Token, held.Version},
		[3]any{heldErr.Lease.Holder, heldErr.Lease.Token, heldErr.Lease.Version})

	ctx, cancel = context.WithTimeout(testCtx(t), 300*time.Millisecond)
	defer cancel()
	_, err = s.TryAcquire(ctx, "held", "candidate", time.Minute, held)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the takeover, a write, waits for the table lock")
}

// TestTokensSurviveLostRowsAfterClockStep proves that a token is never
// lowered when the lease rows are lost after the server's clock stepped
// back: the last term's token was issued while the clock read an hour
// ahead (the row is set to what that term left), then the table is
// truncated; the next token must still exceed it (DESIGN: a high-water mark
// outside the lease rows, not the clock alone).
func TestTokensSurviveLostRowsAfterClockStep(t *testing.T) {
	s := openStore(t, WithSchema(freshSchema(t)))
	conn := rawConn(t)
	l, err := s.TryAcquire(testCtx(t), "stepped", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	ahead := int64(l.Token) + int64(time.Hour/time.Microsecond)
	_, err = conn.Exec(testCtx(t), `UPDATE `+s.Table()+` SET token = $1, version = $1 WHERE name = 'stepped'`, ahead)
	require.NoError(t, err)
	l.Token = uint64(ahead)
	require.NoError(t, s.Release(testCtx(t), l))
	_, err = conn.Exec(testCtx(t), `TRUNCATE `+s.Table())
	require.NoError(t, err)
	next, err := s.TryAcquire(testCtx(t), "stepped", "b", time.Minute, elector.Lease{})
	require.NoError(t, err)
	assert.Greater(t, next.Token, uint64(ahead), "a token issued after the rows were lost went back")
}
