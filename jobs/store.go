package jobs

import (
	"context"
	"database/sql"
)

// FencedStore is what the reference jobs need from a lease store:
// *sqlitelease.Store implements it. A narrow interface lets tests wrap the
// store, for example to count fenced transactions.
type FencedStore interface {
	// DB returns a pool on the same database for schema setup, reads and
	// writes that need no leadership (such as enqueueing work).
	DB() *sql.DB
	// Fenced runs fn in a transaction that commits only if the term carried
	// by ctx is still the current, unreleased term of its lease. Otherwise
	// it returns an error wrapping elector.ErrLeaseLost and nothing fn wrote
	// is kept; a ctx without a term gives an error wrapping
	// elector.ErrNoTerm.
	Fenced(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error
}
