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
// current and live at ?4.
const checkTermSQL = `SELECT 1 FROM ` + leaseTable + `
WHERE name = ?1 AND holder = ?2 AND token = ?3 AND expires_at > ?4`

// Fenced runs fn in a transaction on the store's file that commits only if
// the leader term that ctx carries (see [elector.LeaseFromContext]) is still
// the current, unexpired term of its lease. It is [Store.FencedLease] with
// that term's lease. A ctx without a term gets an error matching
// [elector.ErrNoTerm]; a term that has already ended, or whose lease is no
// longer current, gets an error matching [elector.ErrLeaseLost], and nothing
// is written.
func (s *Store) Fenced(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	l, ok := elector.LeaseFromContext(ctx)
	if !ok {
		return fmt.Errorf("sqlitelease: fenced write: %w", elector.ErrNoTerm)
	}
	if t, ok := elector.TermFromContext(ctx); ok {
		select {
		case <-t.Done():
			return fmt.Errorf("sqlitelease: fenced write for lease %q token %d: the term has ended (%w): %w",
				l.Name, l.Token, t.Err(), elector.ErrLeaseLost)
		default:
		}
	}
	return s.FencedLease(ctx, l, fn)
}

// FencedLease runs fn in a transaction on the store's file that commits only
// if l (its name, holder and token) is still the current, unexpired term of
// its lease. The store checks that at the start of the transaction and again
// right before the commit; if either check fails, or fn returns an error,
// the transaction rolls back and nothing fn wrote is kept. A failed check
// returns an error matching [elector.ErrLeaseLost]; fn's own error is
// returned as is.
//
// The transaction is BEGIN IMMEDIATE on a connection of the [Store.DB] pool,
// not the lease connection, so it never delays a lease operation in Go's
// pool. It does hold SQLite's single write lock from start to end, though:
// every other writer of the file, lease renewals included, waits for it, so
// keep fn short and do slow work (network calls) before or after. fn must
// use tx for everything it reads and writes in the file, and must not commit
// or roll back tx itself. A busy database is retried until ctx ends.
func (s *Store) FencedLease(ctx context.Context, l elector.Lease, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if err := elector.ValidateName(l.Name); err != nil {
		return err
	}
	if fn == nil {
		return errors.New("sqlitelease: fenced write with a nil function")
	}
	if s.isClosed.Load() {
		return ErrClosed
	}
	var tx *sql.Tx
	err := retryBusy(ctx, func() (err error) {
		tx, err = s.db.BeginTx(ctx, nil)
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
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitelease: fenced write for lease %q in %q: commit: %w", l.Name, s.path, err)
	}
	return nil
}

// checkTerm returns nil if l is the current, live term, seen from tx.
func (s *Store) checkTerm(ctx context.Context, tx *sql.Tx, l elector.Lease) error {
	var one int
	err := tx.QueryRowContext(ctx, checkTermSQL, l.Name, l.Holder, int64(l.Token), time.Now().UnixMilli()).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlitelease: fenced write for lease %q token %d of %q: the term is no longer current: %w",
			l.Name, l.Token, l.Holder, elector.ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("sqlitelease: fenced write for lease %q in %q: check the term: %w", l.Name, s.path, err)
	}
	return nil
}
