// Package jobdb is the database the reference jobs write to: the
// [FencedStore] they take, its PostgreSQL form ([Postgres]), and the
// creation of their tables in the dialect of the database ([Create]).
//
// The reference jobs write their statements once, in what SQLite and
// PostgreSQL both speak: numbered placeholders $1, $2, ... (SQLite reads $N
// as parameter N), INSERT ... ON CONFLICT ... DO UPDATE SET col =
// excluded.col, RETURNING instead of LastInsertId, and times as integer Unix
// nanoseconds. Only their CREATE TABLE statements differ (an INTEGER PRIMARY
// KEY and STRICT tables on SQLite, identity columns and bytea on
// PostgreSQL). On PostgreSQL they go in the first schema of the
// connection's search_path.
package jobdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/pgsql"
	"github.com/leaderaware/leaderaware/pglease"
)

// FencedStore is what the reference jobs need from a lease store, in the
// terms of database/sql, so that they run unchanged on either store:
// *sqlitelease.Store implements it, and so does [Postgres].
type FencedStore interface {
	// DB returns a pool on the same database for schema setup, reads and
	// writes that need no leadership (such as enqueueing work).
	DB() *sql.DB
	// Fenced runs fn in a transaction that commits only while the term
	// carried by ctx still leads (see elector.Fence); fn must not commit or
	// roll back tx.
	Fenced(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error
}

// Postgres is a [pglease.Store] as a [FencedStore]: its pool seen through
// database/sql. Close it before the Store.
type Postgres struct {
	db   *sql.DB
	held string // the check that the term still holds its lease row
}

// NewPostgres returns s's pool ([pglease.Store.Pool]) as a [FencedStore]. It
// takes no connection of its own.
func NewPostgres(s *pglease.Store) *Postgres {
	return &Postgres{db: stdlib.OpenDBFromPool(s.Pool()), held: pgsql.For(s.Table()).Fence}
}

// DB returns the pool as a *sql.DB. The caller must not close it.
func (p *Postgres) DB() *sql.DB { return p.db }

// Close closes the *sql.DB of [Postgres.DB], leaving the pool open.
func (p *Postgres) Close() error { return p.db.Close() }

// Fenced runs fn in a transaction that locks the term's lease row FOR SHARE
// and whose statements and idle waits the server bounds by the trust the
// term has left, so that a frozen job cannot hold off a takeover.
func (p *Postgres) Fenced(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return elector.Fence(ctx, p.begin, func(ctx context.Context, tx pgTx) error { return fn(ctx, tx.Tx) })
}

func (p *Postgres) begin(ctx context.Context, _ elector.Lease, trust time.Duration) (pgTx, error) {
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return pgTx{}, fmt.Errorf("fenced write: begin: %w", err)
	}
	bound := strconv.FormatInt(max(trust.Milliseconds(), 1), 10)
	if _, err := tx.ExecContext(ctx, `SELECT set_config('statement_timeout', $1, true),
		set_config('idle_in_transaction_session_timeout', $1, true)`, bound); err != nil {
		_ = tx.Rollback()
		return pgTx{}, fmt.Errorf("fenced write: bound the transaction to %s: %w", trust, err)
	}
	return pgTx{tx, p.held}, nil
}

// pgTx is a database/sql transaction on PostgreSQL as an elector.FencedTx.
type pgTx struct {
	*sql.Tx
	held string
}

func (t pgTx) Held(ctx context.Context, l elector.Lease) error {
	var ok bool
	err := t.QueryRowContext(ctx, t.held, l.Name, l.Holder, int64(l.Token)).Scan(&ok)
	switch {
	case errors.Is(err, sql.ErrNoRows) || err == nil && !ok:
		return fmt.Errorf("fenced write for lease %q token %d of %q: the term no longer holds the lease: %w", l.Name, l.Token, l.Holder, elector.ErrLeaseLost)
	case err != nil:
		return fmt.Errorf("fenced write for lease %q token %d: check the lease: %w", l.Name, l.Token, err)
	}
	return nil
}

func (t pgTx) Commit(context.Context) error { return t.Tx.Commit() }

func (t pgTx) Rollback(context.Context) error { return t.Tx.Rollback() }
