package elector

import (
	"context"
	"fmt"
	"time"
)

// rollbackTimeout bounds the Rollback of a fenced write that was refused or
// failed, which runs even once the write's context has ended.
const rollbackTimeout = 5 * time.Second

// FencedTx is a store's transaction for a fenced write, as [Fence] drives it.
type FencedTx interface {
	// Held returns nil if l is still the current, unreleased term of its
	// lease as the transaction sees it, and otherwise an error matching
	// ErrLeaseLost. It may lock the lease row until the transaction ends.
	Held(ctx context.Context, l Lease) error
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// Fence runs fn in a transaction that commits only while the term that ctx
// carries (see [ContextWithTerm]) still leads: the term must be neither
// ended nor past its trust window before begin and again right before the
// commit, and tx.Held must hold before fn and after it. begin gets the term's
// lease and the trust it has left, which also bounds ctx. Without a term it
// returns an error matching [ErrNoTerm]; a refused write rolls back and
// returns an error matching [ErrLeaseLost] (and the term's own error, if it
// ended, also when begin or Held failed because of it); fn's error rolls back and is returned as it is. Fence reports the
// outcome with [ObserveFenced]. Stores' Fenced methods call it.
func Fence[T FencedTx](ctx context.Context, begin func(ctx context.Context, l Lease, trust time.Duration) (T, error), fn func(ctx context.Context, tx T) error) (err error) {
	t, ok := TermFromContext(ctx)
	if !ok {
		return fmt.Errorf("fenced write: %w", ErrNoTerm)
	}
	defer func() { ObserveFenced(ctx, err) }()
	l := t.Lease()
	trust, err := leads(t, l)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, trust)
	defer cancel()
	// A step that fails once the term no longer leads (its trust window
	// closed, which ended ctx) is refused as such.
	refused := func(err error) error {
		if _, lerr := leads(t, l); lerr != nil {
			return fmt.Errorf("%w (%v)", lerr, err)
		}
		return err
	}
	tx, err := begin(ctx, l, trust)
	if err != nil {
		return refused(err)
	}
	committed := false
	defer func() {
		if !committed {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			defer cancel()
			_ = tx.Rollback(rctx)
		}
	}()
	if err := tx.Held(ctx, l); err != nil {
		return refused(err)
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	if err := tx.Held(ctx, l); err != nil {
		return refused(err)
	}
	if _, err := leads(t, l); err != nil {
		return err
	}
	committed = true
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("fenced write for lease %q token %d: commit: %w", l.Name, l.Token, err)
	}
	return nil
}

// leads returns the trust t has left, or an error matching ErrLeaseLost if
// it ended or its trust window closed.
func leads(t Term, l Lease) (time.Duration, error) {
	trust := t.TrustRemaining() // ends the term if its window closed
	select {
	case <-t.Done():
		return 0, fmt.Errorf("fenced write for lease %q token %d: the term has ended (%w): %w", l.Name, l.Token, t.Err(), ErrLeaseLost)
	default:
	}
	if trust <= 0 { // a Term of another make, which did not end itself
		return 0, fmt.Errorf("fenced write for lease %q token %d: the term's trust window has closed (%w): %w", l.Name, l.Token, ErrLeaseExpired, ErrLeaseLost)
	}
	return trust, nil
}
