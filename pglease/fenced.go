package pglease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderaware/leaderaware/elector"
)

// Fenced runs fn in a transaction on [Store.Pool] that commits only while
// the term that ctx carries still leads, as [elector.Fence] says. The lease
// row stays locked FOR SHARE until the transaction ends, which holds off a
// takeover and the holder's own renewals: keep fn short.
func (s *Store) Fenced(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	l, _ := elector.LeaseFromContext(ctx)
	return s.fenced(ctx, l, func(ctx context.Context, ms int64) (fencedTx, error) {
		tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: fmt.Sprintf(
			"BEGIN; SET LOCAL statement_timeout = %d; SET LOCAL idle_in_transaction_session_timeout = %d", ms, ms)})
		return pgxTx{tx}, err
	}, func(ctx context.Context, tx fencedTx) error { return fn(ctx, tx.(pgxTx).Tx) })
}

// rollbackTimeout bounds a rollback; then pgx closes the connection.
const rollbackTimeout = 5 * time.Second

// fencedTx is the transaction of a fenced write, from pgx or database/sql;
// held runs the Fence statement.
type fencedTx interface {
	held(ctx context.Context, sql string, l elector.Lease) (bool, error)
	commit(ctx context.Context) error
	rollback(ctx context.Context)
}

// fenced runs fn through [elector.Fence] in the transaction begin starts,
// bounded by the trust it gets in ms. The term comes from ctx, not l.
func (s *Store) fenced(ctx context.Context, _ elector.Lease, begin func(ctx context.Context, ms int64) (fencedTx, error), fn func(ctx context.Context, tx fencedTx) error) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return elector.Fence(ctx, func(ctx context.Context, l elector.Lease, trust time.Duration) (fence, error) {
		tx, err := begin(ctx, millis(trust))
		if err != nil {
			return fence{}, s.fenceErr(ctx, "begin", l, err)
		}
		return fence{s, tx}, nil
	}, func(ctx context.Context, f fence) error { return fn(ctx, f.tx) })
}

// fenceErr reports the failure of op in the fenced transaction of l's
// term, saying so when the term's trust window has closed meanwhile.
func (s *Store) fenceErr(ctx context.Context, op string, l elector.Lease, err error) error {
	if t, ok := elector.TermFromContext(ctx); ok && t.TrustRemaining() <= 0 {
		return fmt.Errorf("pglease: fenced write for lease %q token %d: %s: the term's trust window closed: %w (%w; %v)",
			l.Name, l.Token, op, elector.ErrLeaseLost, elector.ErrLeaseExpired, withoutSecrets(err, s.secrets...))
	}
	return s.opErr(op+" fenced write for", l.Name, err)
}

// fence is a fencedTx as an [elector.FencedTx].
type fence struct {
	s  *Store
	tx fencedTx
}

func (f fence) Held(ctx context.Context, l elector.Lease) error {
	current, err := f.tx.held(ctx, f.s.stmts.Fence, l)
	switch {
	case err != nil:
		return f.s.fenceErr(ctx, "check", l, err)
	case !current:
		return fmt.Errorf("pglease: fenced write for lease %q token %d of %q: %w", l.Name, l.Token, l.Holder, elector.ErrLeaseLost)
	}
	return nil
}

func (f fence) Commit(ctx context.Context) error { return f.tx.commit(ctx) }

func (f fence) Rollback(ctx context.Context) error {
	f.tx.rollback(ctx)
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
