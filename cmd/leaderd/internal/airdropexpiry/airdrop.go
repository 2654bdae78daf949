package airdropexpiry

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/jobdb"
)

// dueIndex is the same on both dialects.
const dueIndex = `CREATE INDEX IF NOT EXISTS airdropexpiry_due ON airdropexpiry_airdrops (deadline, id)
	WHERE claimed_at IS NULL AND expired_at IS NULL`

// tables creates the package's table, airdropexpiry_airdrops.
var tables = jobdb.Tables{
	jobdb.SQLite: {`CREATE TABLE IF NOT EXISTS airdropexpiry_airdrops (
	id            INTEGER PRIMARY KEY,
	recipient     TEXT NOT NULL,
	amount        INTEGER NOT NULL, -- in the token's smallest unit
	deadline      INTEGER NOT NULL, -- Unix nanoseconds
	claimed_at    INTEGER,          -- Unix nanoseconds; NULL until claimed
	expired_at    INTEGER,          -- Unix nanoseconds; NULL until expired
	expired_token INTEGER           -- fencing token of the term that expired it
) STRICT`, dueIndex},
	jobdb.PostgreSQL: {`CREATE TABLE IF NOT EXISTS airdropexpiry_airdrops (
	id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	recipient     text NOT NULL,
	amount        bigint NOT NULL, -- in the token's smallest unit
	deadline      bigint NOT NULL, -- Unix nanoseconds
	claimed_at    bigint,          -- Unix nanoseconds; NULL until claimed
	expired_at    bigint,          -- Unix nanoseconds; NULL until expired
	expired_token bigint           -- fencing token of the term that expired it
)`, dueIndex},
}

// Why [Job.Claim] and [Job.Get] fail.
var (
	errNotFound     = errors.New("airdrop not found")
	errNotClaimable = errors.New("airdrop cannot be claimed")
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
	var id int64
	err := j.store.DB().QueryRowContext(ctx,
		`INSERT INTO airdropexpiry_airdrops (recipient, amount, deadline) VALUES ($1, $2, $3) RETURNING id`,
		recipient, amount, deadline.UnixNano()).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("airdropexpiry: create airdrop for %q: %w", recipient, err)
	}
	return id, nil
}

// Pending returns how many airdrops are neither claimed nor expired, due or
// not. It is a plain read (no term needed).
func (j *Job) Pending(ctx context.Context) (int, error) {
	var n int
	err := j.store.DB().QueryRowContext(ctx,
		`SELECT count(*) FROM airdropexpiry_airdrops WHERE claimed_at IS NULL AND expired_at IS NULL`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("airdropexpiry: count pending airdrops: %w", err)
	}
	return n, nil
}

// Claim marks airdrop id claimed at Config.Now. It is a plain write (any
// replica may claim). It returns an error saying why if there is no such
// airdrop, or if it is claimed or expired already or its deadline has
// passed.
func (j *Job) Claim(ctx context.Context, id int64) error {
	now := j.cfg.Now().UnixNano()
	res, err := j.store.DB().ExecContext(ctx,
		`UPDATE airdropexpiry_airdrops SET claimed_at = $1
		WHERE id = $2 AND claimed_at IS NULL AND expired_at IS NULL AND deadline > $1`,
		now, id)
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
		return fmt.Errorf("airdropexpiry: claim airdrop %d: %w: claimed already at %v", id, errNotClaimable, a.ClaimedAt)
	case !a.ExpiredAt.IsZero():
		return fmt.Errorf("airdropexpiry: claim airdrop %d: %w: expired at %v", id, errNotClaimable, a.ExpiredAt)
	default:
		return fmt.Errorf("airdropexpiry: claim airdrop %d: %w: deadline %v has passed", id, errNotClaimable, a.Deadline)
	}
}

// Get returns airdrop id, or an error saying it is not found.
func (j *Job) Get(ctx context.Context, id int64) (Airdrop, error) {
	var a Airdrop
	var deadline int64
	var claimed, expired, token sql.NullInt64
	err := j.store.DB().QueryRowContext(ctx,
		`SELECT id, recipient, amount, deadline, claimed_at, expired_at, expired_token
		FROM airdropexpiry_airdrops WHERE id = $1`, id).
		Scan(&a.ID, &a.Recipient, &a.Amount, &deadline, &claimed, &expired, &token)
	if errors.Is(err, sql.ErrNoRows) {
		return a, fmt.Errorf("airdropexpiry: airdrop %d: %w", id, errNotFound)
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
