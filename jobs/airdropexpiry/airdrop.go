package airdropexpiry

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Table is the SQLite table the package owns.
const Table = "airdropexpiry_airdrops"

var schema = []string{
	`CREATE TABLE IF NOT EXISTS airdropexpiry_airdrops (
	id            INTEGER PRIMARY KEY,
	recipient     TEXT NOT NULL,
	amount        INTEGER NOT NULL, -- in the token's smallest unit
	deadline      INTEGER NOT NULL, -- Unix nanoseconds
	claimed_at    INTEGER,          -- Unix nanoseconds; NULL until claimed
	expired_at    INTEGER,          -- Unix nanoseconds; NULL until expired
	expired_token INTEGER           -- fencing token of the term that expired it
) STRICT`,
	`CREATE INDEX IF NOT EXISTS airdropexpiry_due ON airdropexpiry_airdrops (deadline, id)
	WHERE claimed_at IS NULL AND expired_at IS NULL`,
}

// Errors of [Job.Claim] and [Job.Get]; match with errors.Is.
var (
	ErrNotFound     = errors.New("airdrop not found")
	ErrNotClaimable = errors.New("airdrop cannot be claimed")
)

// Airdrop is one row of the table.
type Airdrop struct {
	ID           int64
	Recipient    string
	Amount       int64     // in the token's smallest unit
	Deadline     time.Time // claimable strictly before it
	ClaimedAt    time.Time // zero until claimed
	ExpiredAt    time.Time // zero until expired
	ExpiredToken uint64    // fencing token of the term that expired it; 0 until expired
}

// Create inserts an unclaimed airdrop and returns its id. It is a plain
// write (no term needed). recipient must be non-empty and amount positive.
func (j *Job) Create(ctx context.Context, recipient string, amount int64, deadline time.Time) (int64, error) {
	if recipient == "" {
		return 0, errors.New("airdropexpiry: create: empty recipient")
	}
	if amount <= 0 {
		return 0, fmt.Errorf("airdropexpiry: create: amount %d is not positive", amount)
	}
	res, err := j.store.DB().ExecContext(ctx,
		`INSERT INTO airdropexpiry_airdrops (recipient, amount, deadline) VALUES (?, ?, ?)`,
		recipient, amount, deadline.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("airdropexpiry: create airdrop for %q: %w", recipient, err)
	}
	return res.LastInsertId()
}

// Claim marks airdrop id claimed at Config.Now. It is a plain write (any
// replica may claim). It returns an error wrapping [ErrNotFound] if there is
// no such airdrop, and [ErrNotClaimable] if it is claimed or expired already
// or its deadline has passed.
func (j *Job) Claim(ctx context.Context, id int64) error {
	now := j.cfg.Now().UnixNano()
	res, err := j.store.DB().ExecContext(ctx,
		`UPDATE airdropexpiry_airdrops SET claimed_at = ?
		WHERE id = ? AND claimed_at IS NULL AND expired_at IS NULL AND deadline > ?`,
		now, id, now)
	if err != nil {
		return fmt.Errorf("airdropexpiry: claim airdrop %d: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	a, err := j.Get(ctx, id)
	if err != nil {
		return err
	}
	switch {
	case !a.ClaimedAt.IsZero():
		return fmt.Errorf("airdropexpiry: claim airdrop %d: %w: claimed already at %v", id, ErrNotClaimable, a.ClaimedAt)
	case !a.ExpiredAt.IsZero():
		return fmt.Errorf("airdropexpiry: claim airdrop %d: %w: expired at %v", id, ErrNotClaimable, a.ExpiredAt)
	default:
		return fmt.Errorf("airdropexpiry: claim airdrop %d: %w: deadline %v has passed", id, ErrNotClaimable, a.Deadline)
	}
}

// Get returns airdrop id, or an error wrapping [ErrNotFound].
func (j *Job) Get(ctx context.Context, id int64) (Airdrop, error) {
	var a Airdrop
	var deadline int64
	var claimed, expired, token sql.NullInt64
	err := j.store.DB().QueryRowContext(ctx,
		`SELECT id, recipient, amount, deadline, claimed_at, expired_at, expired_token
		FROM airdropexpiry_airdrops WHERE id = ?`, id).
		Scan(&a.ID, &a.Recipient, &a.Amount, &deadline, &claimed, &expired, &token)
	if errors.Is(err, sql.ErrNoRows) {
		return a, fmt.Errorf("airdropexpiry: airdrop %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return a, fmt.Errorf("airdropexpiry: read airdrop %d: %w", id, err)
	}
	a.Deadline = time.Unix(0, deadline)
	if claimed.Valid {
		a.ClaimedAt = time.Unix(0, claimed.Int64)
	}
	if expired.Valid {
		a.ExpiredAt = time.Unix(0, expired.Int64)
	}
	a.ExpiredToken = uint64(token.Int64)
	return a, nil
}
