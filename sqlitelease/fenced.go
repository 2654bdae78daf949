package sqlitelease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// Fenced runs fn in a transaction on the store's file that commits only
// while the term that ctx carries leads (see [elector.Fence]) and its lease
// is still the current, unreleased term in the file at the store's path
// (see [ErrFileChanged]); otherwise it rolls back and returns an error
// matching [elector.ErrLeaseLost]. fn must use tx for everything it reads
// and writes in the file, and must not commit or roll back tx itself.
//
// The transaction is BEGIN IMMEDIATE on a connection of the [Store.DB]
// pool, and holds SQLite's single write lock until it ends: no lease in the
// file can be renewed, released or taken over meanwhile. Keep fn short.
func (s *Store) Fenced(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if fn == nil {
		return errors.New("sqlitelease: fenced write with a nil function")
	}
	return elector.Fence(ctx, s.beginFenced, func(ctx context.Context, tx fencedTx) error { return fn(ctx, tx.tx) })
}

// fencedTx is the transaction of a fenced write, for elector.Fence.
type fencedTx struct {
	s  *Store
	tx *sql.Tx
}

// checkTermSQL finds the term ?1 ?2 ?3 (name, holder, token) if it is
// current and unreleased.
const checkTermSQL = `SELECT 1 FROM ` + leaseTable + `
WHERE name = ?1 AND holder = ?2 AND token = ?3 AND NOT released`

// beginFenced begins the transaction of a fenced write of l. The file is
// checked first, so that a new connection of the pool does not open another
// file at the path.
func (s *Store) beginFenced(ctx context.Context, l elector.Lease, _ time.Duration) (fencedTx, error) {
	if s.isClosed.Load() {
		return fencedTx{}, ErrClosed
	}
	if err := s.checkFileForWrite(l); err != nil {
		return fencedTx{}, err
	}
	var tx *sql.Tx
	err := retryBusy(ctx, func() (err error) {
		tx, err = s.DB().BeginTx(ctx, nil)
		return err
	})
	if err != nil {
		return fencedTx{}, fmt.Errorf("sqlitelease: fenced write for lease %q in %q: begin: %w", l.Name, s.path, err)
	}
	return fencedTx{s, tx}, nil
}

// Held returns nil if l is the current, unreleased term, seen from the
// transaction, in the file at the store's path.
func (t fencedTx) Held(ctx context.Context, l elector.Lease) error {
	if err := t.s.checkFileForWrite(l); err != nil {
		return err
	}
	var one int
	err := t.tx.QueryRowContext(ctx, checkTermSQL, l.Name, l.Holder, sqlInt(l.Token)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlitelease: fenced write for lease %q token %d of %q: the term is no longer current: %w",
			l.Name, l.Token, l.Holder, elector.ErrLeaseLost)
	}
	if err != nil {
		if term, ok := elector.TermFromContext(ctx); ok && ctx.Err() != nil && term.TrustRemaining() <= 0 {
			// elector.Fence bounds ctx by the trust window, and database/sql
			// rolled the transaction back when it closed.
			err = fmt.Errorf("%w (%w): %w", err, term.Err(), elector.ErrLeaseLost)
		}
		return fmt.Errorf("sqlitelease: fenced write for lease %q in %q: check the term: %w", l.Name, t.s.path, err)
	}
	return nil
}

func (t fencedTx) Commit(context.Context) error   { return t.tx.Commit() }
func (t fencedTx) Rollback(context.Context) error { return t.tx.Rollback() }

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
