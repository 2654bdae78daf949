package sqlitelease_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/stepclock"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// jobTable creates the job's table and returns a function that counts its rows.
func jobTable(t *testing.T, s *sqlitelease.Store) func() int {
	t.Helper()
	_, err := s.DB().ExecContext(bg(t), `CREATE TABLE IF NOT EXISTS prices (sym TEXT PRIMARY KEY, cents INTEGER)`)
	require.NoError(t, err)
	return func() int {
		t.Helper()
		var n int
		require.NoError(t, s.DB().QueryRowContext(bg(t), `SELECT count(*) FROM prices`).Scan(&n))
		return n
	}
}

func insertPrice(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO prices (sym, cents) VALUES ('ACME', 4200)`)
	return err
}

func TestFencedCommitsWhenCurrent(t *testing.T) {
	s := open(t)
	rows := jobTable(t, s)
	l, err := s.TryAcquire(bg(t), "prices", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, s.FencedLease(bg(t), l, insertPrice))
	assert.Equal(t, 1, rows())
	// A renewed lease is the same term.
	r, err := s.Renew(bg(t), l, time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.FencedLease(bg(t), r, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE prices SET cents = 4300`)
		return err
	}))
}

func TestFencedRefusedAfterTakeover(t *testing.T) {
	s := open(t)
	rows := jobTable(t, s)
	old, err := s.TryAcquire(bg(t), "prices", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	// b watched old unchanged for its TTL (the elector's part) and takes over.
	_, err = s.TryAcquire(bg(t), "prices", "b", time.Minute, old)
	require.NoError(t, err)

	called := false
	err = s.FencedLease(bg(t), old, func(ctx context.Context, tx *sql.Tx) error {
		called = true
		return insertPrice(ctx, tx)
	})
	require.ErrorIs(t, err, elector.ErrLeaseLost)
	assert.False(t, called, "a stale term must not even run the job's statements")
	assert.Equal(t, 0, rows(), "nothing may be written")
}

func TestFencedRefusedAfterRelease(t *testing.T) {
	s := open(t)
	rows := jobTable(t, s)
	l, err := s.TryAcquire(bg(t), "prices", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, s.Release(bg(t), l))
	require.ErrorIs(t, s.FencedLease(bg(t), l, insertPrice), elector.ErrLeaseLost)
	assert.Equal(t, 0, rows())
}

// TestFencedRefusedWhenTermEndsDuringWrite ends the term while the job's
// statements run, without a store write (the store cannot be written
// meanwhile): Fenced checks the term again before the commit.
func TestFencedRefusedWhenTermEndsDuringWrite(t *testing.T) {
	s := open(t)
	rows := jobTable(t, s)
	e, err := elector.New(s, "prices", elector.Config{TTL: 10 * time.Second, Holder: "a"})
	require.NoError(t, err)
	term, err := e.Campaign(bg(t))
	require.NoError(t, err)
	err = s.Fenced(elector.ContextWithTerm(bg(t), term), func(ctx context.Context, tx *sql.Tx) error {
		if err := insertPrice(ctx, tx); err != nil {
			return err
		}
		term.Abandon() // the term ends as the job runs
		return nil
	})
	require.ErrorIs(t, err, elector.ErrLeaseLost)
	assert.ErrorIs(t, err, elector.ErrAbandoned, "the error says how the term ended")
	assert.Equal(t, 0, rows(), "the check before commit must roll the write back")
	// The store still has the abandoned term: only the term's end refused it.
	require.NoError(t, s.FencedLease(bg(t), term.Lease(), insertPrice))
}

func TestFencedJobErrorRollsBack(t *testing.T) {
	s := open(t)
	rows := jobTable(t, s)
	l, err := s.TryAcquire(bg(t), "prices", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	boom := errors.New("boom")
	err = s.FencedLease(bg(t), l, func(ctx context.Context, tx *sql.Tx) error {
		if err := insertPrice(ctx, tx); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	assert.Equal(t, 0, rows())
}

func TestFencedWithoutTerm(t *testing.T) {
	s := open(t)
	rows := jobTable(t, s)
	err := s.Fenced(bg(t), insertPrice)
	require.ErrorIs(t, err, elector.ErrNoTerm)
	assert.Equal(t, 0, rows())
}

// TestFencedTermFromContext runs fenced writes with the term an elector
// gives, as a decorated job would.
func TestFencedTermFromContext(t *testing.T) {
	s := open(t)
	rows := jobTable(t, s)
	e, err := elector.New(s, "prices", elector.Config{TTL: 10 * time.Second, Holder: "a"})
	require.NoError(t, err)
	term, err := e.Campaign(bg(t))
	require.NoError(t, err)
	ctx := elector.ContextWithTerm(bg(t), term)

	require.NoError(t, s.Fenced(ctx, insertPrice))
	assert.Equal(t, 1, rows())

	require.NoError(t, term.Resign(bg(t)))
	err = s.Fenced(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM prices`)
		return err
	})
	require.ErrorIs(t, err, elector.ErrLeaseLost)
	assert.ErrorIs(t, err, elector.ErrResigned, "the error says how the term ended")
	assert.Equal(t, 1, rows())

	// The lease itself, given explicitly, is refused by the store's check.
	l, ok := elector.LeaseFromContext(ctx)
	require.True(t, ok)
	require.ErrorIs(t, s.FencedLease(bg(t), l, insertPrice), elector.ErrLeaseLost)
}

// TestStoreKeepsNoExpiry: the store never decides that a lease ran out. Long
// after its TTL, a lease whose holder stopped renewing is still held, still
// renewable and still good for fenced writes; only a candidate that watched
// it (the elector's part) takes it over.
func TestStoreKeepsNoExpiry(t *testing.T) {
	s := open(t)
	rows := jobTable(t, s)
	l, err := s.TryAcquire(bg(t), "prices", "a", time.Millisecond, elector.Lease{})
	require.NoError(t, err)
	time.Sleep(20 * time.Millisecond)

	got, err := s.Get(bg(t), "prices")
	require.NoError(t, err, "Get compares no times")
	assert.Equal(t, l.Token, got.Token)
	_, err = s.TryAcquire(bg(t), "prices", "b", time.Minute, elector.Lease{})
	require.ErrorIs(t, err, elector.ErrHeld, "a candidate that watched nothing must not take it")
	require.NoError(t, s.FencedLease(bg(t), l, insertPrice), "the fenced check compares no times")
	assert.Equal(t, 1, rows())
	_, err = s.Renew(bg(t), l, time.Minute)
	require.NoError(t, err)
}

// recorder is an elector.Observer that keeps the events.
type recorder struct {
	mu     sync.Mutex
	events []elector.Event
}

func (r *recorder) Observe(e elector.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// TestFencedReportsToObserver: Fenced reports each commit and refusal to the
// observer that the context carries.
func TestFencedReportsToObserver(t *testing.T) {
	s := open(t)
	jobTable(t, s)
	e, err := elector.New(s, "prices", elector.Config{TTL: 10 * time.Second, Holder: "a"})
	require.NoError(t, err)
	term, err := e.Campaign(bg(t))
	require.NoError(t, err)
	rec := &recorder{}
	ctx := elector.ContextWithObserver(elector.ContextWithTerm(bg(t), term), rec)

	require.NoError(t, s.Fenced(ctx, insertPrice))
	require.NoError(t, term.Resign(bg(t)))
	require.ErrorIs(t, s.Fenced(ctx, insertPrice), elector.ErrLeaseLost)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.events, 2)
	for i, want := range []elector.Result{elector.ResultOK, elector.ResultLost} {
		assert.Equal(t, elector.EventFenced, rec.events[i].Kind)
		assert.Equal(t, want, rec.events[i].Result)
		assert.Equal(t, "prices", rec.events[i].Lease)
		assert.Equal(t, term.Token(), rec.events[i].Token)
	}
}

// TestFencedRefusedAfterSuspend: after a suspend longer than the trust
// window, the term is still open until its renewal timer fires (timers run
// on Go's monotonic clock, which a suspend does not advance). Fenced asks
// the term how long it is still trusted, on a clock that counts suspend,
// and refuses before the commit, whether the suspend came before the write
// or while the job's statements ran.
func TestFencedRefusedAfterSuspend(t *testing.T) {
	for _, tc := range []struct {
		name   string
		during bool // suspend while fn runs
	}{
		{name: "before the write"},
		{name: "during the write", during: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := stepclock.New()
			s := open(t, sqlitelease.WithClock(c))
			rows := jobTable(t, s)
			e, err := elector.New(s, "prices", elector.Config{TTL: 10 * time.Second, Holder: "a"})
			require.NoError(t, err)
			term, err := e.Campaign(bg(t))
			require.NoError(t, err)
			defer func() { require.NoError(t, term.Resign(bg(t))) }()
			ctx := elector.ContextWithTerm(bg(t), term)

			suspend := func() { c.Suspend(time.Hour) }
			if !tc.during {
				suspend()
			}
			called := false
			err = s.Fenced(ctx, func(ctx context.Context, tx *sql.Tx) error {
				called = true
				if tc.during {
					suspend()
				}
				return insertPrice(ctx, tx)
			})
			t.Log(err)
			require.ErrorIs(t, err, elector.ErrLeaseLost)
			assert.ErrorIs(t, err, elector.ErrLeaseExpired)
			assert.Contains(t, err.Error(), "expired")
			assert.Equal(t, tc.during, called)
			assert.Equal(t, 0, rows(), "nothing may be committed")
			select {
			case <-term.Done():
			default:
				t.Error("the term is still open after its trust window closed")
			}
		})
	}
}

// trustTerm is a Term of another make than the elector's that tells its
// trust but never ends by itself.
type trustTerm struct {
	lease elector.Lease
	left  time.Duration
}

func (t *trustTerm) Lease() elector.Lease                 { return t.lease }
func (t *trustTerm) Token() uint64                        { return t.lease.Token }
func (t *trustTerm) Done() <-chan struct{}                { return nil }
func (t *trustTerm) Err() error                           { return nil }
func (t *trustTerm) Resign(context.Context) error         { return nil }
func (t *trustTerm) Abandon()                             {}
func (t *trustTerm) TrustRemaining() (left time.Duration) { return t.left }

// TestFencedRefusedUntrustedTerm: a term that says it is no longer trusted
// is refused even though it has not ended.
func TestFencedRefusedUntrustedTerm(t *testing.T) {
	s := open(t)
	rows := jobTable(t, s)
	l, err := s.TryAcquire(bg(t), "prices", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	term := &trustTerm{lease: l, left: time.Second}
	require.NoError(t, s.Fenced(elector.ContextWithTerm(bg(t), term), insertPrice))
	assert.Equal(t, 1, rows())

	term.left = 0
	err = s.Fenced(elector.ContextWithTerm(bg(t), term), insertPrice)
	t.Log(err)
	require.ErrorIs(t, err, elector.ErrLeaseLost)
	assert.ErrorIs(t, err, elector.ErrLeaseExpired)
	assert.Equal(t, 1, rows())
}
