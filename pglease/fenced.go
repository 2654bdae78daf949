package pglease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderaware/leaderaware/elector"
)

// Fenced runs fn in a transaction that commits only while the term that ctx
// carries (see [elector.LeaseFromContext]; the decorator gives it to the jobs
// it starts) still holds its lease. Without a term it returns an error
// wrapping [elector.ErrNoTerm] and runs nothing. See [Store.FencedLease].
func (s *Store) Fenced(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	l, ok := elector.LeaseFromContext(ctx)
	if !ok {
		return fmt.Errorf("pglease: fenced write: %w", elector.ErrNoTerm)
	}
	return s.FencedLease(ctx, l, fn)
}

// rollbackTimeout bounds the rollback of a fenced transaction that did not
// commit; if it runs out, pgx closes the connection and the server rolls
// back.
const rollbackTimeout = 5 * time.Second

// FencedLease runs fn in a transaction on the store's pool ([Store.Pool]),
// fenced by l. The transaction first locks the lease row FOR SHARE where
// name, holder and token match l and the lease is not released. If there is
// no such row, FencedLease rolls back, runs nothing and returns an error
// wrapping [elector.ErrLeaseLost]. Otherwise the row lock keeps the term
// current until the transaction ends (a takeover, a renewal and a release of
// the lease wait for it), fn runs, and the transaction commits if fn returns
// nil.
//
// The write may take as long as the holder still trusts its term: until
// the start of the last acquire or renew of l's term through this Store
// plus l's TTL minus the safety margin (a whole such window from now if
// this Store did not write the term). fn's ctx ends then, and a commit
// after that fails with an error wrapping [elector.ErrLeaseExpired] (and,
// like every refusal, [elector.ErrLeaseLost]). The
// server bounds each statement, and each wait for the client, by the same
// time (statement_timeout, idle_in_transaction_session_timeout), so that a
// process frozen inside fn cannot hold off a takeover: the server ends its
// transaction. A term whose trust has run out gets ErrLeaseExpired (and
// ErrLeaseLost) and runs nothing. Keep fn short: while it runs, the holder's own renewals wait too.
//
// An error from fn rolls back and is returned as it is.
func (s *Store) FencedLease(ctx context.Context, l elector.Lease, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return s.fenced(ctx, l, func(ctx context.Context, ms int64) (fencedTx, error) {
		tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: fmt.Sprintf(
			"BEGIN; SET LOCAL statement_timeout = %d; SET LOCAL idle_in_transaction_session_timeout = %d", ms, ms)})
		return pgxTx{tx}, err
	}, func(ctx context.Context, tx fencedTx) error { return fn(ctx, tx.(pgxTx).Tx) })
}

// fencedTx is the transaction of a fenced write, from pgx or database/sql.
type fencedTx interface {
	// held reports whether the lease row still holds the term (the Fence
	// statement), locking it FOR SHARE.
	held(ctx context.Context, sql string, l elector.Lease) (bool, error)
	commit(ctx context.Context) error
	rollback(ctx context.Context)
}

// fenced is the protocol of every fenced write of l's term: refuse a term
// whose trust has run out, begin a transaction whose statements and idle
// waits the server bounds to the trust left (begin gets it in ms), lock and
// check the lease row, run fn, commit, and report the outcome to the
// observer in ctx.
func (s *Store) fenced(ctx context.Context, l elector.Lease, begin func(ctx context.Context, ms int64) (fencedTx, error), fn func(ctx context.Context, tx fencedTx) error) (err error) {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := elector.ValidateName(l.Name); err != nil {
		return err
	}
	if err := elector.ValidateTTL(l.TTL); err != nil {
		return fmt.Errorf("pglease: fenced write for lease %q: pass the lease the store returned: %w", l.Name, err)
	}
	defer func() { elector.ObserveFenced(ctx, err) }()
	term := fmt.Sprintf("pglease: fenced write for lease %q token %d of %q", l.Name, l.Token, l.Holder)
	left := s.trustLeft(l)
	// A term past its trust window is refused like a lost one: both errors
	// match, so callers that check ErrLeaseLost see every refusal.
	if left <= 0 {
		return fmt.Errorf("%s: the term's trust window has closed: %w (%w)", term, elector.ErrLeaseLost, elector.ErrLeaseExpired)
	}
	ended := fmt.Errorf("%s: the term's trust window closed during the write: %w (%w)", term, elector.ErrLeaseLost, elector.ErrLeaseExpired)
	ctx, cancel := context.WithTimeoutCause(ctx, left, ended)
	defer cancel()
	// failed reports a failure of the transaction itself, not of fn.
	failed := func(op string, err error) error {
		if context.Cause(ctx) == ended {
			return fmt.Errorf("%w (%s: %v)", ended, op, withoutSecrets(err, s.secrets...))
		}
		return s.opErr(op+" fenced write for", l.Name, err)
	}
	tx, err := begin(ctx, millis(left))
	if err != nil {
		return failed("begin", err)
	}
	defer tx.rollback(ctx) // a no-op after commit
	current, err := tx.held(ctx, s.stmts.Fence, l)
	switch {
	case err != nil:
		return failed("check", err)
	case !current:
		return fmt.Errorf("%s: %w", term, elector.ErrLeaseLost)
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	if err := tx.commit(ctx); err != nil {
		return failed("commit", err)
	}
	return nil
}

// pgxTx is a pgx transaction as a fencedTx.
type pgxTx struct{ pgx.Tx }

func (t pgxTx) held(ctx context.Context, sql string, l elector.Lease) (bool, error) {
	var ok bool
	err := t.QueryRow(ctx, sql, l.Name, l.Holder, int64(l.Token)).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return ok, err
}

func (t pgxTx) commit(ctx context.Context) error { return t.Commit(ctx) }

func (t pgxTx) rollback(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	_ = t.Rollback(rctx)
	cancel()
}
