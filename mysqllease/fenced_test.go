package mysqllease

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/clock"
	"github.com/leaderaware/leaderaware/internal/testing/stepclock"
)

// fakeTerm is a term that knows its lease and never ends, all a fenced
// write asks.
type fakeTerm struct {
	elector.Term
	l elector.Lease
}

func (f fakeTerm) Lease() elector.Lease  { return f.l }
func (f fakeTerm) Done() <-chan struct{} { return nil }
func (f fakeTerm) Err() error            { return nil }

func (f fakeTerm) TrustRemaining() time.Duration { return f.l.TTL }

func termCtx(ctx context.Context, l elector.Lease) context.Context {
	return elector.ContextWithTerm(ctx, fakeTerm{l: l})
}

// jobTable makes the job table of s's test (dropped with its lease table).
func jobTable(t *testing.T, s *Store) string {
	t.Helper()
	name := quote(s.opts.table + "_jobs")
	_, err := s.DB().ExecContext(testCtx(t), "CREATE TABLE "+name+" (id INT PRIMARY KEY, token BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB")
	require.NoError(t, err)
	return name
}

func jobRows(t *testing.T, s *Store, table string) int {
	t.Helper()
	var n int
	require.NoError(t, s.DB().QueryRowContext(testCtx(t), "SELECT COUNT(*) FROM "+table).Scan(&n))
	return n
}

func insertJob(table string, id int, token uint64) func(context.Context, *sql.Tx) error {
	return func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO "+table+" (id, token) VALUES (?, ?)", id, token)
		return err
	}
}

func TestFencedCommitsForCurrentTerm(t *testing.T) {
	s := openStore(t, "")
	jobs := jobTable(t, s)
	ctx := testCtx(t)
	l, err := s.TryAcquire(ctx, "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, s.Fenced(termCtx(ctx, l), insertJob(jobs, 1, l.Token)))
	// A renewal keeps the term: its fenced writes still commit.
	_, err = s.Renew(ctx, l, time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Fenced(termCtx(ctx, l), insertJob(jobs, 2, l.Token)))
	assert.Equal(t, 2, jobRows(t, s, jobs))
}

func TestFencedRefusedAfterTakeover(t *testing.T) {
	s := openStore(t, "")
	jobs := jobTable(t, s)
	ctx := testCtx(t)
	old, err := s.TryAcquire(ctx, "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	cur, err := s.TryAcquire(ctx, "job", "b", time.Minute, old)
	require.NoError(t, err)
	ran := false
	err = s.Fenced(termCtx(ctx, old), func(ctx context.Context, tx *sql.Tx) error {
		ran = true
		return insertJob(jobs, 1, old.Token)(ctx, tx)
	})
	require.ErrorIs(t, err, elector.ErrLeaseLost)
	assert.Contains(t, err.Error(), `"job"`)
	assert.False(t, ran, "a stale term's function must not run")
	require.NoError(t, s.Fenced(termCtx(ctx, cur), insertJob(jobs, 2, cur.Token)))
	assert.Equal(t, 1, jobRows(t, s, jobs))

	// The same holder's earlier term is stale too.
	again, err := s.TryAcquire(ctx, "job", "b", time.Minute, cur)
	require.NoError(t, err)
	require.ErrorIs(t, s.Fenced(termCtx(ctx, cur), insertJob(jobs, 3, cur.Token)), elector.ErrLeaseLost)
	require.NoError(t, s.Release(ctx, again))
	require.ErrorIs(t, s.Fenced(termCtx(ctx, again), insertJob(jobs, 4, again.Token)), elector.ErrLeaseLost, "after release")
	assert.Equal(t, 1, jobRows(t, s, jobs))
}

// TestFencedHoldsOffTakeover: while a fenced transaction runs, its term
// stays current: a takeover waits for the commit and only then succeeds.
func TestFencedHoldsOffTakeover(t *testing.T) {
	s := openStore(t, "")
	other := openStore(t, s.opts.table)
	jobs := jobTable(t, s)
	ctx := testCtx(t)
	l, err := s.TryAcquire(ctx, "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	err = s.Fenced(termCtx(ctx, l), func(ctx context.Context, tx *sql.Tx) error {
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err := other.TryAcquire(short, "job", "b", time.Minute, l)
		if !errors.Is(err, context.DeadlineExceeded) {
			return errors.New("takeover did not wait for the fenced write: " + errString(err))
		}
		return insertJob(jobs, 1, l.Token)(ctx, tx)
	})
	require.NoError(t, err)
	got, err := other.Get(ctx, "job")
	require.NoError(t, err)
	assert.Equal(t, l.Token, got.Token, "the takeover that gave up must not have happened later")
	_, err = other.TryAcquire(ctx, "job", "b", time.Minute, got)
	require.NoError(t, err, "after the commit the takeover goes through")
	assert.Equal(t, 1, jobRows(t, s, jobs))
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func TestFencedFnErrorRollsBack(t *testing.T) {
	s := openStore(t, "")
	jobs := jobTable(t, s)
	ctx := testCtx(t)
	l, err := s.TryAcquire(ctx, "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	boom := errors.New("boom")
	err = s.Fenced(termCtx(ctx, l), func(ctx context.Context, tx *sql.Tx) error {
		if err := insertJob(jobs, 1, l.Token)(ctx, tx); err != nil {
			return err
		}
		return boom
	})
	require.Equal(t, boom, err, "fn's error comes back as it is")
	assert.Equal(t, 0, jobRows(t, s, jobs))
}

func TestFencedNoTerm(t *testing.T) {
	s := openStore(t, "")
	err := s.Fenced(testCtx(t), func(context.Context, *sql.Tx) error {
		t.Fatal("fn ran without a term")
		return nil
	})
	require.ErrorIs(t, err, elector.ErrNoTerm)
}

// TestFencedBoundsTheSession: inside fn the connection's server limits are
// the trust the term has left (not its TTL); afterwards the connection has
// its own back.
func TestFencedBoundsTheSession(t *testing.T) {
	s := openStore(t, "")
	s.DB().SetMaxOpenConns(1) // every query below runs on the one connection
	ctx := testCtx(t)
	vars := `SELECT @@SESSION.innodb_lock_wait_timeout, @@SESSION.wait_timeout, ` + s.stmtVar() + `, @leaderaware_wait IS NULL`
	type limits struct {
		lockWait, wait int64
		stmt           float64
		cleared        bool
	}
	read := func(q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) (l limits) {
		require.NoError(t, q.QueryRowContext(ctx, vars).Scan(&l.lockWait, &l.wait, &l.stmt, &l.cleared))
		return l
	}
	_, err := s.DB().ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 41, SESSION wait_timeout = 4242")
	require.NoError(t, err)
	before := read(s.DB())
	require.Equal(t, limits{41, 4242, before.stmt, true}, before)

	l, err := s.TryAcquire(ctx, "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	term := elector.ContextWithTerm(ctx, &trustTerm{fakeTerm: fakeTerm{l: l}, left: 1500 * time.Millisecond})
	var inside limits
	require.NoError(t, s.Fenced(term, func(ctx context.Context, tx *sql.Tx) error {
		inside = read(tx)
		return nil
	}))
	want := limits{2, 2, 1.5, false}
	if !s.mariaDB {
		want.stmt = 1500 // max_execution_time, milliseconds
	}
	assert.Equal(t, want, inside, "limits inside the fenced write: the trust left, rounded up to seconds where counted in seconds")
	assert.Equal(t, before, read(s.DB()), "limits after the fenced write")

	// A refused write restores them too.
	require.NoError(t, s.Release(ctx, l))
	require.ErrorIs(t, s.Fenced(term, func(context.Context, *sql.Tx) error { return nil }), elector.ErrLeaseLost)
	assert.Equal(t, before, read(s.DB()))
}

func (s *Store) stmtVar() string {
	v, _ := s.statementLimit(0)
	return "@@SESSION." + v
}

func TestCeilSeconds(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int64
	}{
		{time.Nanosecond, 1}, {100 * time.Millisecond, 1}, {time.Second, 1}, {time.Second + 1, 2},
		{elector.MaxTTL, 86400}, {1 << 62, 365 * 24 * 3600}, {0, 1},
	} {
		assert.Equal(t, c.want, ceilSeconds(c.d), "ceilSeconds(%v)", c.d)
	}
}

// TestFencedRefusedEndedTerm: a term that has ended is refused even though
// the lease row still names it (an abandoned term's lease runs out on its
// own), before the transaction, or before the commit when it ends while fn
// runs.
func TestFencedRefusedEndedTerm(t *testing.T) {
	for _, during := range []bool{false, true} {
		t.Run(map[bool]string{false: "before the write", true: "during the write"}[during], func(t *testing.T) {
			s := openStore(t, "")
			jobs := jobTable(t, s)
			ctx := testCtx(t)
			e, err := elector.New(s, "job", elector.Config{TTL: 10 * time.Second, Holder: "a"})
			require.NoError(t, err)
			term, err := e.Campaign(ctx)
			require.NoError(t, err)
			if !during {
				term.Abandon()
			}
			called := false
			err = s.Fenced(elector.ContextWithTerm(ctx, term), func(ctx context.Context, tx *sql.Tx) error {
				called = true
				if during {
					term.Abandon()
				}
				return insertJob(jobs, 1, term.Token())(ctx, tx)
			})
			t.Log(err)
			require.ErrorIs(t, err, elector.ErrLeaseLost)
			assert.ErrorIs(t, err, elector.ErrAbandoned, "the error says how the term ended")
			assert.Equal(t, during, called)
			assert.Equal(t, 0, jobRows(t, s, jobs), "nothing may be committed")
			// The row still holds the abandoned term: only its end refused it.
			require.NoError(t, s.Fenced(termCtx(ctx, term.Lease()), insertJob(jobs, 2, term.Token())))
		})
	}
}

// TestFencedRefusedAfterSuspend: after a suspend longer than the trust
// window, the term is still open until its renewal timer fires (timers run
// on Go's monotonic clock, which a suspend does not advance), and the lease
// row still names it. Fenced asks the term how long it is still trusted, on
// a clock that counts suspend, and refuses, whether the suspend came before
// the write or while fn ran; the term ends.
func TestFencedRefusedAfterSuspend(t *testing.T) {
	for _, during := range []bool{false, true} {
		t.Run(map[bool]string{false: "before the write", true: "during the write"}[during], func(t *testing.T) {
			c := stepclock.New()
			s := openStore(t, "")
			s.clockCarrier = clock.Carry(c)
			jobs := jobTable(t, s)
			ctx := testCtx(t)
			e, err := elector.New(s, "job", elector.Config{TTL: 10 * time.Second, Holder: "a"})
			require.NoError(t, err)
			term, err := e.Campaign(ctx)
			require.NoError(t, err)
			defer term.Abandon()
			suspend := func() { c.Suspend(time.Hour) }
			if !during {
				suspend()
			}
			called := false
			err = s.Fenced(elector.ContextWithTerm(ctx, term), func(ctx context.Context, tx *sql.Tx) error {
				called = true
				if during {
					suspend()
				}
				return insertJob(jobs, 1, term.Token())(ctx, tx)
			})
			t.Log(err)
			require.ErrorIs(t, err, elector.ErrLeaseLost)
			assert.ErrorIs(t, err, elector.ErrLeaseExpired)
			assert.Equal(t, during, called)
			assert.Equal(t, 0, jobRows(t, s, jobs), "nothing may be committed")
			select {
			case <-term.Done():
			default:
				t.Error("the term is still open after its trust window closed")
			}
		})
	}
}

// trustTerm is a term of another make than the elector's that tells how
// long it is still trusted but never ends by itself.
type trustTerm struct {
	fakeTerm
	left time.Duration
}

func (t *trustTerm) TrustRemaining() time.Duration { return t.left }

// TestFencedRefusedUntrustedTerm: a term that says its trust window has
// closed is refused even though it has not ended.
func TestFencedRefusedUntrustedTerm(t *testing.T) {
	s := openStore(t, "")
	jobs := jobTable(t, s)
	ctx := testCtx(t)
	l, err := s.TryAcquire(ctx, "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	term := &trustTerm{fakeTerm: fakeTerm{l: l}, left: time.Second}
	require.NoError(t, s.Fenced(elector.ContextWithTerm(ctx, term), insertJob(jobs, 1, l.Token)))

	term.left = 0
	err = s.Fenced(elector.ContextWithTerm(ctx, term), func(context.Context, *sql.Tx) error {
		t.Error("fn ran for an untrusted term")
		return nil
	})
	t.Log(err)
	require.ErrorIs(t, err, elector.ErrLeaseLost)
	assert.ErrorIs(t, err, elector.ErrLeaseExpired)
	assert.Equal(t, 1, jobRows(t, s, jobs))
}
