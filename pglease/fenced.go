package pglease

import (
	"context"
	"errors"
	"fmt"

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

// FencedLease runs fn in a transaction on the store's pool, fenced by l. The
// transaction first locks the lease row FOR SHARE where name, holder and
// token match l and the lease is live by the server's clock. If it is not,
// FencedLease rolls back, runs nothing and returns an error wrapping
// [elector.ErrLeaseLost]. Otherwise the row lock keeps the term current until
// the transaction ends (a takeover is refused as held; a renewal and a
// release of the lease wait for it), fn runs, and the transaction commits if
// fn returns nil and the lease is still live right before the commit (if it
// expired while fn ran, the transaction rolls back with an error wrapping
// [elector.ErrLeaseLost]).
//
// An error from fn rolls back and is returned as it is. Keep fn short: while
// it runs, the holder's own renewals wait too.
func (s *Store) FencedLease(ctx context.Context, l elector.Lease, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := elector.ValidateName(l.Name); err != nil {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.opErr("fenced write for", l.Name, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var token int64
	err = tx.QueryRow(ctx, s.sqlFence, l.Name, l.Holder, int64(l.Token)).Scan(&token)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("pglease: fenced write for lease %q token %d of %q: %w", l.Name, l.Token, l.Holder, elector.ErrLeaseLost)
	case err != nil:
		return s.opErr("fenced write for", l.Name, err)
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	// Nobody can have taken the lease (the row is locked), but it may have
	// expired while fn ran: then the holder no longer trusts it either.
	err = tx.QueryRow(ctx, s.sqlFenceRecheck, l.Name, l.Holder, int64(l.Token)).Scan(&token)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("pglease: fenced write for lease %q token %d of %q: the lease expired during the write: %w", l.Name, l.Token, l.Holder, elector.ErrLeaseLost)
	case err != nil:
		return s.opErr("fenced write for", l.Name, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return s.opErr("commit fenced write for", l.Name, err)
	}
	return nil
}
