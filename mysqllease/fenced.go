package mysqllease

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// Fenced runs fn in a transaction on [Store.DB] that commits only while the
// term that ctx carries (see [elector.TermFromContext]; the decorator gives
// it to the jobs it starts) still holds its lease. Without a term it returns
// an error wrapping [elector.ErrNoTerm] and runs nothing.
//
// A term that has ended is refused, and so is one whose trust window has
// closed: a term with TrustRemaining() time.Duration (those of
// [elector.LeaseElector] have it) must have some left. After a suspend the
// window, which counts suspended time, may have closed before the renewal
// timer that would end the term fires. Fenced checks this before the
// transaction and again right before the commit; a refused term gets an
// error wrapping [elector.ErrLeaseLost] and how the term ended
// ([elector.ErrLeaseExpired] for a closed window), and nothing commits.
//
// The transaction first reads the lease row with SELECT ... LOCK IN SHARE
// MODE where name, token and holder match the term and the lease is not
// released. If no row matches, Fenced rolls back, runs nothing and returns
// an error wrapping [elector.ErrLeaseLost]. Otherwise the shared row lock
// keeps the term current until the transaction ends (a takeover, a release
// and the holder's own renewal wait for it), fn runs, and the transaction
// commits if fn returns nil. An error from fn rolls back and is returned as
// it is; fn must not commit or roll back tx itself. Keep fn short: while it
// runs, the holder's renewals wait.
//
// The server bounds the transaction by the lease TTL (rounded up to whole
// seconds where the variable counts seconds): for its duration, Fenced sets
// the connection's innodb_lock_wait_timeout, wait_timeout (so a client that
// froze mid-transaction is cut off and its row lock freed) and
// max_statement_time (MariaDB; max_execution_time on MySQL, which bounds
// SELECTs only), and restores them afterwards.
func (s *Store) Fenced(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) (err error) {
	t, ok := elector.TermFromContext(ctx)
	if !ok {
		return fmt.Errorf("mysqllease: fenced write: %w", elector.ErrNoTerm)
	}
	defer func() { elector.ObserveFenced(ctx, err) }()
	l := t.Lease()
	if s.closed.Load() {
		return ErrClosed
	}
	if err := elector.ValidateName(l.Name); err != nil {
		return fmt.Errorf("mysqllease: fenced write: %w", err)
	}
	if err := elector.ValidateTTL(l.TTL); err != nil {
		return fmt.Errorf("mysqllease: fenced write for lease %q: %w", l.Name, err)
	}
	if err := termEnded(t, l); err != nil {
		return err
	}
	conn, err := s.jobs.Conn(ctx)
	if err != nil {
		return s.opErr("fenced write for", l.Name, err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, s.boundSQL(l.TTL)); err != nil {
		return s.opErr("bound fenced write for", l.Name, err)
	}
	err = s.fenced(ctx, conn, t, l, fn)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restoreTimeout)
	defer cancel()
	if _, rerr := conn.ExecContext(rctx, s.restoreSQL()); rerr != nil {
		// Never hand a connection with our limits back to the pool.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	return err
}

func (s *Store) fenced(ctx context.Context, conn *sql.Conn, t elector.Term, l elector.Lease, fn func(context.Context, *sql.Tx) error) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return s.opErr("fenced write for", l.Name, err)
	}
	defer func() { _ = tx.Rollback() }()
	var token uint64
	err = tx.QueryRowContext(ctx, s.sqlFence, l.Name, l.Token, l.Holder).Scan(&token)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("mysqllease: fenced write for lease %q token %d of %q: %w", l.Name, l.Token, l.Holder, elector.ErrLeaseLost)
	case err != nil:
		return s.opErr("fenced write for", l.Name, err)
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	if err := termEnded(t, l); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return s.opErr("commit fenced write for", l.Name, err)
	}
	return nil
}

// trusted is implemented by the terms of [elector.LeaseElector]:
// TrustRemaining is 0 once the term ended or its trust window closed, and a
// call that finds the window closed ends the term.
type trusted interface{ TrustRemaining() time.Duration }

// termEnded returns an error wrapping [elector.ErrLeaseLost] if the term t
// of the lease l has ended or, for a term that tells, is no longer trusted.
func termEnded(t elector.Term, l elector.Lease) error {
	expired := false
	if tr, ok := t.(trusted); ok {
		expired = tr.TrustRemaining() <= 0 // which ends the term if its trust window closed
	}
	select {
	case <-t.Done():
		return fmt.Errorf("mysqllease: fenced write for lease %q token %d: the term has ended (%w): %w",
			l.Name, l.Token, t.Err(), elector.ErrLeaseLost)
	default:
	}
	if expired { // a Term of another make, which did not end itself
		return fmt.Errorf("mysqllease: fenced write for lease %q token %d: the term's trust window has closed (%w): %w",
			l.Name, l.Token, elector.ErrLeaseExpired, elector.ErrLeaseLost)
	}
	return nil
}

// restoreTimeout bounds restoring the connection's limits after a fenced
// write, which runs even when the write's context has ended.
const restoreTimeout = 10 * time.Second

// Session variables a fenced write sets, saved in user variables of these
// names and restored after.
const (
	savedLockWait = "@leaderaware_lock_wait"
	savedWait     = "@leaderaware_wait"
	savedStmt     = "@leaderaware_stmt"
)

// boundSQL saves the connection's limits and sets them to ttl.
func (s *Store) boundSQL(ttl time.Duration) string {
	secs := strconv.FormatInt(ceilSeconds(ttl), 10)
	stmtVar, stmtVal := s.statementLimit(ttl)
	return "SET " + savedLockWait + " = @@SESSION.innodb_lock_wait_timeout, " +
		savedWait + " = @@SESSION.wait_timeout, " +
		savedStmt + " = @@SESSION." + stmtVar + ", " +
		"SESSION innodb_lock_wait_timeout = " + secs + ", " +
		"SESSION wait_timeout = " + secs + ", " +
		"SESSION " + stmtVar + " = " + stmtVal
}

// restoreSQL puts back what boundSQL saved and clears the user variables.
func (s *Store) restoreSQL() string {
	stmtVar, _ := s.statementLimit(0)
	return "SET SESSION innodb_lock_wait_timeout = " + savedLockWait + ", " +
		"SESSION wait_timeout = " + savedWait + ", " +
		"SESSION " + stmtVar + " = " + savedStmt + ", " +
		savedLockWait + " = NULL, " + savedWait + " = NULL, " + savedStmt + " = NULL"
}

// statementLimit names the server's statement time limit variable and its
// value for ttl: max_statement_time in seconds on MariaDB,
// max_execution_time in milliseconds on MySQL.
func (s *Store) statementLimit(ttl time.Duration) (string, string) {
	if s.mariaDB {
		return "max_statement_time", strconv.FormatFloat(ttl.Seconds(), 'f', 6, 64)
	}
	ms := (ttl + time.Millisecond - 1) / time.Millisecond
	return "max_execution_time", strconv.FormatInt(int64(ms), 10)
}

// ceilSeconds is d in whole seconds, rounded up, at least 1, and at most
// what every server accepts for wait_timeout (a year).
func ceilSeconds(d time.Duration) int64 {
	const maxSecs = 365 * 24 * 3600
	secs := int64(d / time.Second)
	if d%time.Second != 0 && secs < math.MaxInt64 {
		secs++
	}
	return min(max(secs, 1), maxSecs)
}
