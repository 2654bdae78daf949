package pglease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/clock"
)

// sqlLog records the text of every statement run on the pools it traces.
type sqlLog struct {
	mu  sync.Mutex
	sql []string
}

func (q *sqlLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sql = append(q.sql, data.SQL)
	return ctx
}

func (*sqlLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// count returns how often sql ran.
func (q *sqlLog) count(sql string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, s := range q.sql {
		if s == sql {
			n++
		}
	}
	return n
}

// batchFixture is a store, in a fresh schema, whose statements are logged,
// holding n leases ("batch/000", ...).
type batchFixture struct {
	s      *Store
	log    *sqlLog
	leases []elector.Lease
}

func newBatchFixture(t *testing.T, n int) batchFixture {
	cfg, err := pgxpool.ParseConfig(testDSN(t))
	require.NoError(t, err)
	log := &sqlLog{}
	cfg.ConnConfig.Tracer = log // the lease pool copies it
	pool, err := pgxpool.NewWithConfig(testCtx(t), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s, err := New(testCtx(t), pool, WithSchema(freshSchema(t)))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	f := batchFixture{s: s, log: log}
	for i := range n {
		l, err := s.TryAcquire(testCtx(t), fmt.Sprintf("batch/%03d", i), "a", time.Minute, elector.Lease{})
		require.NoError(t, err)
		f.leases = append(f.leases, l)
	}
	return f
}

// renewed is the outcome of one Renew.
type renewed struct {
	l   elector.Lease
	err error
}

// renew starts Renew of l in a goroutine and returns its outcome's channel.
func (f batchFixture) renew(ctx context.Context, l elector.Lease) <-chan renewed {
	ch := make(chan renewed, 1)
	go func() {
		r, err := f.s.Renew(ctx, l, time.Minute)
		ch <- renewed{r, err}
	}()
	return ch
}

// lockTable locks the lease table in a transaction of its own, so that
// renewals wait (reads do not), until the returned function rolls it back.
func (f batchFixture) lockTable(t *testing.T) (unlock func()) {
	tx, err := rawConn(t).Begin(testCtx(t))
	require.NoError(t, err)
	_, err = tx.Exec(testCtx(t), "LOCK TABLE "+f.s.Table()+" IN EXCLUSIVE MODE")
	require.NoError(t, err)
	return func() { require.NoError(t, tx.Rollback(testCtx(t))) }
}

// inFlight locks the lease table and starts renewals of a, alone, then of
// b, in a batch, with ctx, which wait on the lock, so that the renewals
// after them queue for the next batch. It returns the function that lifts
// the lock, and the renewals' outcomes.
func (f batchFixture) inFlight(t *testing.T, ctx context.Context, a, b elector.Lease) (unlock func(), done [2]<-chan renewed) {
	unlock = f.lockTable(t)
	done[0] = f.renew(ctx, a)
	f.waitState(t, "the renewal alone in flight", func(r *renewals) bool { return r.alone == 1 })
	done[1] = f.renew(ctx, b)
	f.waitState(t, "the batch in flight", func(r *renewals) bool { return r.batching && len(r.pending) == 0 })
	return unlock, done
}

// waitState waits until cond holds of the store's renewals.
func (f batchFixture) waitState(t *testing.T, what string, cond func(*renewals) bool) {
	t.Helper()
	waitFor(t, 10*time.Second, what, func() bool {
		f.s.renewals.mu.Lock()
		defer f.s.renewals.mu.Unlock()
		return cond(&f.s.renewals)
	})
}

// waitPending waits until n renewals wait for the next batch.
func (f batchFixture) waitPending(t *testing.T, n int) {
	t.Helper()
	f.waitState(t, fmt.Sprintf("%d pending renewals", n), func(r *renewals) bool { return len(r.pending) == n })
}

// receive returns the outcome on ch, failing t if none comes within d.
func receive(t *testing.T, ch <-chan renewed, d time.Duration, what string) renewed {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("%s: no result within %v", what, d)
		return renewed{}
	}
}

// TestRenewBatch proves that renewals arriving while one is in flight go to
// the server as one statement, and that each caller gets its own result: its
// new version, ErrLeaseLost for a lease taken over, ctx.Err() at once for a
// caller that gives up; and that the trust of each counts from its own call.
func TestRenewBatch(t *testing.T) {
	const n = 50
	f := newBatchFixture(t, n)
	unlock, first := f.inFlight(t, testCtx(t), f.leases[0], f.leases[1])

	lost := f.leases[n-1]
	lost.Token++ // a term that no longer holds the lease
	gone := f.leases[n-2]
	goneCtx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	called := clock.Now()
	results := make([]<-chan renewed, n)
	results[0], results[1] = first[0], first[1]
	for i := 2; i < n-2; i++ {
		results[i] = f.renew(testCtx(t), f.leases[i])
	}
	results[n-2] = f.renew(goneCtx, gone)
	results[n-1] = f.renew(testCtx(t), lost)
	f.waitPending(t, n-2)

	cancel()
	r := receive(t, results[n-2], 5*time.Second, "the cancelled renewal")
	require.ErrorIs(t, r.err, context.Canceled)
	f.s.renewals.mu.Lock()
	assert.True(t, f.s.renewals.batching, "the cancelled renewal returned at once, not after the batch")
	f.s.renewals.mu.Unlock()

	ran := clock.Now()
	unlock()
	for i := 0; i < n-2; i++ {
		r := receive(t, results[i], 10*time.Second, f.leases[i].Name)
		require.NoError(t, r.err, f.leases[i].Name)
		want := f.leases[i]
		got, err := f.s.Get(testCtx(t), want.Name)
		require.NoError(t, err)
		assert.Equal(t, got, r.l, "the caller gets its own lease")
		assert.Greater(t, r.l.Version, want.Version)
		assert.Equal(t, time.Minute, r.l.TTL)
		f.s.mu.Lock()
		st := f.s.stamps[want.Name]
		f.s.mu.Unlock()
		if i < 2 {
			continue // called before the lock; their start may be later than called
		}
		assert.True(t, !st.start.Before(called) && st.start.Before(ran),
			"the trust of %s counts from its call (%v), not from the batch (%v): %v", want.Name, called, ran, st.start)
	}
	r = receive(t, results[n-1], 10*time.Second, "the lost lease")
	require.ErrorIs(t, r.err, elector.ErrLeaseLost)
	for _, l := range []elector.Lease{gone, f.leases[n-1]} {
		got, err := f.s.Get(testCtx(t), l.Name)
		require.NoError(t, err)
		assert.Equal(t, l.Version, got.Version, "%s is not renewed", l.Name)
	}

	assert.Equal(t, 2, f.log.count(f.s.stmts.Renew), "the first renewal alone, and the lost lease again, alone")
	assert.Equal(t, 2, f.log.count(f.s.stmts.RenewBatch), "the second renewal, then the %d after it together", n-3)
}

// TestRenewBatchConcurrent proves that many concurrent renewals of one
// Store take far fewer statements than renewals, each with its own result.
func TestRenewBatchConcurrent(t *testing.T) {
	const n = 200
	f := newBatchFixture(t, n)
	for round := range 3 {
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range f.leases {
			wg.Go(func() {
				r, err := f.s.Renew(testCtx(t), f.leases[i], time.Minute)
				if err == nil && r.Version <= f.leases[i].Version {
					err = fmt.Errorf("version %d, want more than %d", r.Version, f.leases[i].Version)
				}
				f.leases[i], errs[i] = r, err
			})
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...), "round %d", round)
	}
	stmts := f.log.count(f.s.stmts.Renew) + f.log.count(f.s.stmts.RenewBatch)
	t.Logf("%d renewals in %d statements", 3*n, stmts)
	assert.Less(t, stmts, 3*n/4)
}

// TestRenewBatchDeadline proves that a batch statement ends at the earliest
// deadline of its callers, failing every one of them, rather than outliving
// their windows.
func TestRenewBatchDeadline(t *testing.T) {
	f := newBatchFixture(t, 4)
	firstCtx, cancel := context.WithTimeout(testCtx(t), time.Second)
	defer cancel()
	unlock, first := f.inFlight(t, firstCtx, f.leases[0], f.leases[1])
	defer unlock()
	short, cancel := context.WithTimeout(testCtx(t), 2*time.Second)
	defer cancel()
	shortDone := f.renew(short, f.leases[2])
	longDone := f.renew(testCtx(t), f.leases[3]) // a minute
	f.waitPending(t, 2)
	for _, ch := range first {
		require.ErrorIs(t, receive(t, ch, 10*time.Second, "a first renewal").err, context.DeadlineExceeded)
	}

	// The batch of the other two now waits on the lock, until the
	// deadline of the short one.
	r := receive(t, longDone, 10*time.Second, "the renewal batched with a shorter deadline")
	require.ErrorIs(t, r.err, context.DeadlineExceeded)
	require.ErrorIs(t, receive(t, shortDone, time.Second, "the short renewal").err, context.DeadlineExceeded)
	got, err := f.s.Get(testCtx(t), f.leases[3].Name)
	require.NoError(t, err)
	assert.Equal(t, f.leases[3].Version, got.Version, "the failed batch renewed nothing")
}

// TestRenewBatchLockedRow proves that a fenced write in progress on one
// lease, which its renewal waits for, holds up no renewal of another lease.
func TestRenewBatchLockedRow(t *testing.T) {
	const n = 20
	f := newBatchFixture(t, n+1)
	busy := f.leases[n]
	writing, finished := make(chan struct{}), make(chan struct{})
	finish := sync.OnceFunc(func() { close(finished) })
	t.Cleanup(finish) // before the store closes, should the test fail
	fenced := make(chan error, 1)
	go func() {
		fenced <- f.s.FencedLease(testCtx(t), busy, func(context.Context, pgx.Tx) error {
			close(writing)
			<-finished
			return nil
		})
	}()
	<-writing
	waiting := f.renew(testCtx(t), busy)
	waitFor(t, 10*time.Second, "the renewal waiting for the fenced write", func() bool {
		var n int
		require.NoError(t, rawConn(t).QueryRow(testCtx(t), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND strpos(query, $1) > 0`, f.s.Table()).Scan(&n))
		return n == 1
	})

	ctx, cancel := context.WithTimeout(testCtx(t), 2*time.Second)
	defer cancel()
	for round := range 3 {
		results := make([]<-chan renewed, n)
		for i := range n {
			results[i] = f.renew(ctx, f.leases[i])
		}
		for i, ch := range results {
			r := receive(t, ch, 10*time.Second, f.leases[i].Name)
			require.NoError(t, r.err, "round %d: %s", round, f.leases[i].Name)
			f.leases[i] = r.l
		}
	}

	finish()
	require.NoError(t, <-fenced)
	r := receive(t, waiting, 10*time.Second, "the renewal of the lease written")
	require.NoError(t, r.err)
	assert.Greater(t, r.l.Version, busy.Version)
}

// TestRenewBatchClose proves that Close ends a batch in flight and the
// renewals waiting for the next one, with ErrClosed, and stops the batcher
// (goleak in TestMain finds it otherwise).
func TestRenewBatchClose(t *testing.T) {
	f := newBatchFixture(t, 5)
	firstCtx, cancel := context.WithTimeout(testCtx(t), time.Second)
	defer cancel()
	unlock, first := f.inFlight(t, firstCtx, f.leases[0], f.leases[1])
	defer unlock()
	inBatch := []<-chan renewed{f.renew(testCtx(t), f.leases[2]), f.renew(testCtx(t), f.leases[3])}
	f.waitPending(t, 2)
	for _, ch := range first {
		require.ErrorIs(t, receive(t, ch, 10*time.Second, "a first renewal").err, context.DeadlineExceeded)
	}
	f.waitState(t, "the next batch in flight, waiting on the lock", func(r *renewals) bool { return r.batching && len(r.pending) == 0 })
	waiting := f.renew(testCtx(t), f.leases[4])
	f.waitPending(t, 1)

	closed := make(chan struct{})
	go func() {
		_ = f.s.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for the batch in flight")
	}
	for _, ch := range append(inBatch, waiting) {
		require.ErrorIs(t, receive(t, ch, time.Second, "a renewal at Close").err, ErrClosed)
	}
	_, err := f.s.Renew(testCtx(t), f.leases[4], time.Minute)
	require.ErrorIs(t, err, ErrClosed)
}
