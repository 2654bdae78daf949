package pglease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/leaderaware/leaderaware/elector"
)

// SQL is a [Store] seen through database/sql, for code written against it
// rather than pgx, such as the reference jobs (jobs.FencedStore): its DB and
// Fenced have the signatures of *sqlitelease.Store's, so one piece of code
// serves both stores. Statements use PostgreSQL's placeholders, $1, $2, ...
type SQL struct {
	s  *Store
	db *sql.DB
}

// OpenSQL returns s's pool ([Store.Pool]) as a *sql.DB, through pgx's stdlib
// adapter, with fenced transactions on it. It takes no connection of its
// own: every call borrows one from the pool and gives it back. Close it
// before s.
func (s *Store) OpenSQL() *SQL {
	return &SQL{s: s, db: stdlib.OpenDBFromPool(s.pool)}
}

// DB returns the pool as a *sql.DB, for schema setup, reads and writes that
// need no leadership. The caller must not close it; [SQL.Close] does.
func (q *SQL) DB() *sql.DB { return q.db }

// Close closes the *sql.DB of [SQL.DB]. It leaves the Store and its pool
// open.
func (q *SQL) Close() error { return q.db.Close() }

// Fenced is [Store.Fenced] through database/sql: it runs fn in a transaction
// that commits only while the term that ctx carries still holds its lease,
// with the same lease row lock, deadlines and errors as
// [Store.FencedLease]. fn must not commit or roll back tx.
func (q *SQL) Fenced(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	l, ok := elector.LeaseFromContext(ctx)
	if !ok {
		return fmt.Errorf("pglease: fenced write: %w", elector.ErrNoTerm)
	}
	return q.s.fenced(ctx, l, func(ctx context.Context, ms int64) (fencedTx, error) {
		tx, err := q.db.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		bound := strconv.FormatInt(ms, 10)
		if _, err := tx.ExecContext(ctx, `SELECT set_config('statement_timeout', $1, true),
			set_config('idle_in_transaction_session_timeout', $1, true)`, bound); err != nil {
			_ = tx.Rollback()
			return nil, err
		}
		return sqlTx{tx}, nil
	}, func(ctx context.Context, tx fencedTx) error { return fn(ctx, tx.(sqlTx).Tx) })
}

// sqlTx is a database/sql transaction as a fencedTx.
type sqlTx struct{ *sql.Tx }

func (t sqlTx) held(ctx context.Context, query string, l elector.Lease) (bool, error) {
	var ok bool
	err := t.QueryRowContext(ctx, query, l.Name, l.Holder, int64(l.Token)).Scan(&ok)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return ok, err
}

func (t sqlTx) commit(context.Context) error { return t.Commit() }

func (t sqlTx) rollback(context.Context) { _ = t.Rollback() }

// LeaseRow is a lease as [Store.List] reports it: the last term of its
// name, held or released. Its fields are those of sqlitelease.LeaseRow, so
// a value of one converts to the other.
type LeaseRow struct {
	// Lease is the last term: for a released lease, its last holder and
	// token, and the Version and Written of the release.
	elector.Lease
	// Released reports that the last holder released the lease, so it is
	// free. A held lease whose holder died is not released: candidates take
	// it over once they have watched it unchanged for its TTL.
	Released bool
}

// List returns every lease the table has held, in name order. It is a read
// for status displays: it needs no term and goes through [Store.Pool], so
// it never delays a lease operation. It returns an empty slice for a table
// without leases and [ErrClosed] after Close.
func (s *Store) List(ctx context.Context) ([]LeaseRow, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	rows, err := s.pool.Query(ctx, s.stmts.List)
	if err != nil {
		return nil, s.listErr(err)
	}
	defer rows.Close()
	out := []LeaseRow{}
	for rows.Next() {
		var r LeaseRow
		var token, version, ttlUS int64
		if err := rows.Scan(&r.Name, &r.Holder, &token, &version, &ttlUS, &r.Released, &r.Written); err != nil {
			return nil, s.listErr(err)
		}
		r.Token, r.Version, r.TTL = uint64(token), uint64(version), fromMicros(ttlUS)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.listErr(err)
	}
	return out, nil
}

func (s *Store) listErr(err error) error {
	return fmt.Errorf("pglease: list leases in %s on %s: %w", s.table, s.target, poolerHint(withoutSecrets(err, s.secrets...)))
}
