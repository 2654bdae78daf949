package jobs

import (
	"context"
	"database/sql"
)

// FencedStore is what the reference jobs need from a lease store, in the
// terms of database/sql, so that they run unchanged on either store:
// *sqlitelease.Store implements it, and so does the *pglease.SQL that
// pglease.Store.OpenSQL returns. A narrow interface also lets tests wrap the
// store, for example to count fenced transactions.
//
// The reference jobs write their statements once, in what SQLite and
// PostgreSQL both speak: numbered placeholders $1, $2, ... (SQLite reads $N
// as parameter N), INSERT ... ON CONFLICT ... DO UPDATE SET col =
// excluded.col, RETURNING instead of LastInsertId, and times as integer Unix
// nanoseconds. Only their CREATE TABLE statements differ (an INTEGER PRIMARY
// KEY and STRICT tables on SQLite, identity columns and bytea on
// PostgreSQL); each job asks the database which one it is when it creates
// its tables. On PostgreSQL they go in the first schema of the connection's
// search_path.
type FencedStore interface {
	// DB returns a pool on the same database for schema setup, reads and
	// writes that need no leadership (such as enqueueing work).
	DB() *sql.DB
	// Fenced runs fn in a transaction that commits only if the term carried
	// by ctx is still the current, unreleased term of its lease. Otherwise
	// it returns an error wrapping elector.ErrLeaseLost (on PostgreSQL also
	// elector.ErrLeaseExpired once the term's trust window has closed) and
	// nothing fn wrote is kept; a ctx without a term gives an error wrapping
	// elector.ErrNoTerm. fn must not commit or roll back tx.
	Fenced(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error
}
