package mysqllease

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// Fenced runs fn in a transaction on [Store.DB] that commits only while the
// term that ctx carries still holds its lease, as [elector.Fence] says.
// While the transaction is open the lease cannot change hands and the
// holder's renewals wait, so keep fn short; fn must not commit or roll back
// tx itself.
func (s *Store) Fenced(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return elector.Fence(ctx, s.beginFenced, func(ctx context.Context, tx *fencedTx) error { return fn(ctx, tx.tx) })
}

// fencedTx is a fenced write's transaction on a connection of its own,
// whose server limits it restores when it ends.
type fencedTx struct {
	s    *Store
	conn *sql.Conn
	tx   *sql.Tx
}

// beginFenced bounds a connection of the jobs' pool by trust on the server
// (see boundSQL) and begins the transaction on it.
func (s *Store) beginFenced(ctx context.Context, l elector.Lease, trust time.Duration) (*fencedTx, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	conn, err := s.jobs.Conn(ctx)
	if err != nil {
		return nil, s.opErr("fenced write for", leasesOf(l.Name), err)
	}
	t := &fencedTx{s: s, conn: conn}
	if _, err = conn.ExecContext(ctx, s.boundSQL(trust)); err == nil {
		t.tx, err = conn.BeginTx(ctx, nil)
	}
	if err != nil {
		t.end()
		return nil, s.opErr("begin fenced write for", leasesOf(l.Name), err)
	}
	return t, nil
}

// Held reads the lease row of l's term with a shared lock, which keeps the
// term current until the transaction ends.
func (t *fencedTx) Held(ctx context.Context, l elector.Lease) error {
	var token uint64
	err := t.tx.QueryRowContext(ctx, t.s.sqlFence, l.Name, l.Token, l.Holder).Scan(&token)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("mysqllease: fenced write for lease %q token %d of %q: %w", l.Name, l.Token, l.Holder, elector.ErrLeaseLost)
	case err != nil:
		return t.s.opErr("fenced write for", leasesOf(l.Name), err)
	}
	return nil
}

func (t *fencedTx) Commit(context.Context) error {
	defer t.end()
	return t.tx.Commit()
}

func (t *fencedTx) Rollback(context.Context) error {
	defer t.end()
	return t.tx.Rollback()
}

// end restores the connection's limits and gives it back to the pool, or
// drops it if they could not be restored.
func (t *fencedTx) end() {
	ctx, cancel := context.WithTimeout(context.Background(), restoreTimeout)
	defer cancel()
	if _, err := t.conn.ExecContext(ctx, t.s.restoreSQL()); err != nil {
		_ = t.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = t.conn.Close()
}

// restoreTimeout bounds restoring a connection's limits (ctx may have ended).
const restoreTimeout = 10 * time.Second

// boundSQL saves the connection's limits in user variables and sets them to
// d, the term's trust: the lock wait, the idle time (so that a client frozen
// mid-transaction is cut off and its row lock freed) and the statement
// time, rounded up to whole seconds where the variable counts seconds.
func (s *Store) boundSQL(d time.Duration) string {
	secs := strconv.FormatInt(ceilSeconds(d), 10)
	stmtVar, stmtVal := s.statementLimit(d)
	return "SET @leaderaware_lock_wait = @@SESSION.innodb_lock_wait_timeout, @leaderaware_wait = @@SESSION.wait_timeout, " +
		"@leaderaware_stmt = @@SESSION." + stmtVar + ", SESSION innodb_lock_wait_timeout = " + secs + ", " +
		"SESSION wait_timeout = " + secs + ", SESSION " + stmtVar + " = " + stmtVal
}

// restoreSQL puts back what boundSQL saved and clears the user variables.
func (s *Store) restoreSQL() string {
	stmtVar, _ := s.statementLimit(0)
	return "SET SESSION innodb_lock_wait_timeout = @leaderaware_lock_wait, SESSION wait_timeout = @leaderaware_wait, " +
		"SESSION " + stmtVar + " = @leaderaware_stmt, @leaderaware_lock_wait = NULL, @leaderaware_wait = NULL, @leaderaware_stmt = NULL"
}

// statementLimit names the server's statement time limit variable and its
// value for d: max_statement_time in seconds on MariaDB, max_execution_time
// in milliseconds on MySQL (which bounds SELECTs only).
func (s *Store) statementLimit(d time.Duration) (string, string) {
	if s.mariaDB {
		return "max_statement_time", strconv.FormatFloat(d.Seconds(), 'f', 6, 64)
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return "max_execution_time", strconv.FormatInt(int64(ms), 10)
}

// ceilSeconds is d in whole seconds, rounded up, at least 1, and at most
// what every server accepts for wait_timeout (a year).
func ceilSeconds(d time.Duration) int64 {
	const maxSecs = 365 * 24 * 3600
	return min(max(int64((d-1)/time.Second)+1, 1), maxSecs)
}
