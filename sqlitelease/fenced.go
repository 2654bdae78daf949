package sqlitelease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// checkTermSQL finds the term ?1 ?2 ?3 (name, holder, token) if it is
// current and unreleased.
const checkTermSQL = `SELECT 1 FROM ` + leaseTable + `
WHERE name = ?1 AND holder = ?2 AND token = ?3 AND NOT released`

// Fenced is [Store.FencedLease] for the lease of the leader term that ctx
// carries (see [elector.ContextWithTerm]), and it also requires that the
// term has not ended, checked before the transaction and again right before
// its commit: a term that ends while fn runs (say, its trust window closed
// while the process was frozen) gets its write rolled back. A term that has
// TrustRemaining() time.Duration (those of [elector.LeaseElector] do) must
// also still be trusted then: after a suspend, its trust window, which
// counts suspended time, may have closed before the renewal timer that
// would end the term fires. A ctx without a term gets an error matching
// [elector.ErrNoTerm]; an ended or expired term gets an error matching
// [elector.ErrLeaseLost] and the term's own error ([elector.ErrLeaseExpired]
// for one whose trust window closed). Fenced reports commits and refusals
// to the observer in ctx, if any ([elector.ObserveFenced]).
func (s *Store) Fenced(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	t, ok := elector.TermFromContext(ctx)
	if !ok {
		return fmt.Errorf("sqlitelease: fenced write: %w", elector.ErrNoTerm)
	}
	l := t.Lease()
	err := s.fenced(ctx, l, func() error { return termEnded(t, l) }, fn)
	elector.ObserveFenced(ctx, err)
	return err
}

// FencedLease runs fn in a transaction on the store's file that commits only
// if l (its name, holder and token) is still the current, unreleased term of
// its lease and the store's file is still the one at its path (see
// [ErrFileChanged]). The store checks that at the start of the transaction
// and again right before the commit; if either check fails, or fn returns an
// error, the transaction rolls back and nothing fn wrote is kept. A failed
// check returns an error matching [elector.ErrLeaseLost]; fn's own error is
// returned as is.
//
// The transaction is BEGIN IMMEDIATE on a connection of the [Store.DB] pool,
// not the lease connection, so it never delays a lease operation in Go's
// pool. It does hold SQLite's single write lock from start to end, though:
// no other writer of the file can write until it ends, so no lease in the
// file can be renewed, released or taken over meanwhile (see the package
// documentation). Keep fn short and do slow work (network calls) before or
// after. fn must use tx for everything it reads and writes in the file, and
// must not commit or roll back tx itself. A busy database is retried until
// ctx ends.
func (s *Store) FencedLease(ctx context.Context, l elector.Lease, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return s.fenced(ctx, l, func() error { return nil }, fn)
}

// fenced is FencedLease that also refuses to begin or commit once ended
// returns an error.
func (s *Store) fenced(ctx context.Context, l elector.Lease, ended func() error, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if err := elector.ValidateName(l.Name); err != nil {
		return err
	}
	if fn == nil {
		return errors.New("sqlitelease: fenced write with a nil function")
	}
	if s.isClosed.Load() {
		return ErrClosed
	}
	if err := ended(); err != nil {
		return err
	}
	// The file is checked before the transaction too, so that a new
	// connection of the pool does not open another file at the path.
	if err := s.checkFileForWrite(l); err != nil {
		return err
	}
	var tx *sql.Tx
	err := retryBusy(ctx, func() (err error) {
		tx, err = s.DB().BeginTx(ctx, nil)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlitelease: fenced write for lease %q in %q: begin: %w", l.Name, s.path, err)
	}
	defer tx.Rollback() // a no-op after Commit
	if err := s.checkTerm(ctx, tx, l); err != nil {
		return err
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	if err := s.checkTerm(ctx, tx, l); err != nil {
		return err
	}
	if err := ended(); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitelease: fenced write for lease %q in %q: commit: %w", l.Name, s.path, err)
	}
	return nil
}

// checkTerm returns nil if l is the current, unreleased term, seen from tx,
// in the file at the store's path.
func (s *Store) checkTerm(ctx context.Context, tx *sql.Tx, l elector.Lease) error {
	if err := s.checkFileForWrite(l); err != nil {
		return err
	}
	var one int
	err := tx.QueryRowContext(ctx, checkTermSQL, l.Name, l.Holder, sqlInt(l.Token)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlitelease: fenced write for lease %q token %d of %q: the term is no longer current: %w",
			l.Name, l.Token, l.Holder, elector.ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("sqlitelease: fenced write for lease %q in %q: check the term: %w", l.Name, s.path, err)
	}
	return nil
}

// checkFileForWrite is checkFile for a fenced write of l: a changed file,
// or one with a second path, means that l is not the current term of the
// file at the path, and so does a term that ended when the Store left its
// file for a new one.
func (s *Store) checkFileForWrite(l elector.Lease) error {
	err := s.checkFile()
	if err == nil && s.endedTerm(l.Token) {
		err = errTermEnded
	}
	switch {
	case errors.Is(err, ErrFileChanged), errors.Is(err, ErrSecondPath):
		return fmt.Errorf("sqlitelease: fenced write for lease %q in %q: %w: %w", l.Name, s.path, err, elector.ErrLeaseLost)
	case err != nil:
		return fmt.Errorf("sqlitelease: fenced write for lease %q in %q: %w", l.Name, s.path, err)
	}
	return nil
}

// trusted is implemented by the terms of [elector.LeaseElector]:
// TrustRemaining is 0 once the term ended or its trust window closed, and a
// call that finds the window closed ends the term.
type trusted interface{ TrustRemaining() time.Duration }

// termEnded returns an error if the term t of the lease l has ended or, for
// a term that tells, is no longer trusted.
func termEnded(t elector.Term, l elector.Lease) error {
	expired := false
	if tr, ok := t.(trusted); ok {
		expired = tr.TrustRemaining() <= 0 // which ends the term if its trust window closed
	}
	select {
	case <-t.Done():
		return fmt.Errorf("sqlitelease: fenced write for lease %q token %d: the term has ended (%w): %w",
			l.Name, l.Token, t.Err(), elector.ErrLeaseLost)
	default:
	}
	if expired { // a Term of another make, which did not end itself
		return fmt.Errorf("sqlitelease: fenced write for lease %q token %d: the term's trust window has closed (%w): %w",
			l.Name, l.Token, elector.ErrLeaseExpired, elector.ErrLeaseLost)
	}
	return nil
}
