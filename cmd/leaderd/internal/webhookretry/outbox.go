package webhookretry

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/jobdb"
)

// The indexes are the same on both dialects.
const (
	dueIndex = `CREATE INDEX IF NOT EXISTS webhookretry_due ON webhookretry_deliveries (next_attempt_at, id)
	WHERE status = 'pending'`
	inflightIndex = `CREATE INDEX IF NOT EXISTS webhookretry_inflight ON webhookretry_deliveries (claimed_until)
	WHERE status = 'inflight'`
)

// tables creates the package's table, webhookretry_deliveries.
var tables = jobdb.Tables{
	jobdb.SQLite: {`CREATE TABLE IF NOT EXISTS webhookretry_deliveries (
	id               INTEGER PRIMARY KEY,
	url              TEXT NOT NULL,
	payload          BLOB NOT NULL,
	idempotency_key  TEXT NOT NULL UNIQUE,
	status           TEXT NOT NULL CHECK (status IN ('pending', 'inflight', 'delivered', 'dead')),
	attempts         INTEGER NOT NULL DEFAULT 0,
	next_attempt_at  INTEGER NOT NULL,    -- Unix nanoseconds
	claim_token      INTEGER NOT NULL DEFAULT 0,
	claimed_until    INTEGER,             -- Unix nanoseconds, while in flight
	last_status_code INTEGER NOT NULL DEFAULT 0,
	last_error       TEXT NOT NULL DEFAULT '',
	created_at       INTEGER NOT NULL,    -- Unix nanoseconds
	delivered_at     INTEGER              -- Unix nanoseconds
) STRICT`, dueIndex, inflightIndex},
	jobdb.PostgreSQL: {`CREATE TABLE IF NOT EXISTS webhookretry_deliveries (
	id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	url              text NOT NULL,
	payload          bytea NOT NULL,
	idempotency_key  text NOT NULL UNIQUE,
	status           text NOT NULL CHECK (status IN ('pending', 'inflight', 'delivered', 'dead')),
	attempts         integer NOT NULL DEFAULT 0,
	next_attempt_at  bigint NOT NULL,    -- Unix nanoseconds
	claim_token      bigint NOT NULL DEFAULT 0,
	claimed_until    bigint,             -- Unix nanoseconds, while in flight
	last_status_code integer NOT NULL DEFAULT 0,
	last_error       text NOT NULL DEFAULT '',
	created_at       bigint NOT NULL,    -- Unix nanoseconds
	delivered_at     bigint              -- Unix nanoseconds
)`, dueIndex, inflightIndex},
}

// errNotFound is returned (wrapped) by [Outbox.Get] for an unknown id.
var errNotFound = errors.New("delivery not found")

// Outbox is the table of webhook deliveries and its worker. Enqueue and the
// reads need no leadership; any replica may call them. Run the worker
// ([Outbox.Worker]) on one replica by decorating it.
type Outbox struct {
	store  jobdb.FencedStore
	cfg    Config
	worker *Worker
}

// New creates the table if it does not exist (using store.DB and ctx), on
// SQLite or PostgreSQL, and returns the outbox. It validates cfg; errors
// name the bad value.
func New(ctx context.Context, store jobdb.FencedStore, cfg Config) (*Outbox, error) {
	if store == nil {
		return nil, errors.New("webhookretry: nil store")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := jobdb.Create(ctx, store.DB(), "webhookretry", tables); err != nil {
		return nil, err
	}
	o := &Outbox{store: store, cfg: cfg}
	o.worker = newWorker(o)
	return o, nil
}

// Worker returns the outbox's worker job; every call returns the same one.
func (o *Outbox) Worker() *Worker { return o.worker }

// Enqueue adds a delivery of payload to rawURL, due at once, and returns
// its id. rawURL must be an absolute http or https URL. The delivery gets a
// random Idempotency-Key that all its attempts share. Enqueue is a plain
// write: it needs no leadership.
func (o *Outbox) Enqueue(ctx context.Context, rawURL string, payload []byte) (int64, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return 0, fmt.Errorf("webhookretry: enqueue: URL %q: %w", rawURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return 0, fmt.Errorf("webhookretry: enqueue: URL %q is not an absolute http or https URL", rawURL)
	}
	if payload == nil {
		payload = []byte{}
	}
	var id int64
	err = o.store.DB().QueryRowContext(ctx,
		`INSERT INTO webhookretry_deliveries (url, payload, idempotency_key, status, next_attempt_at, created_at)
		VALUES ($1, $2, $3, 'pending', $4, $4) RETURNING id`,
		rawURL, payload, rand.Text(), o.cfg.Now().UnixNano()).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("webhookretry: enqueue to %s: %w", rawURL, err)
	}
	return id, nil
}

const selectDelivery = `SELECT id, url, payload, idempotency_key, status, attempts, next_attempt_at,
	claim_token, claimed_until, last_status_code, last_error, created_at, delivered_at
FROM webhookretry_deliveries`

// Get returns delivery id, or an error saying it is not found.
func (o *Outbox) Get(ctx context.Context, id int64) (Delivery, error) {
	d, err := scanDelivery(o.store.DB().QueryRowContext(ctx, selectDelivery+` WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return d, fmt.Errorf("webhookretry: delivery %d: %w", id, errNotFound)
	}
	if err != nil {
		return d, fmt.Errorf("webhookretry: read delivery %d: %w", id, err)
	}
	return d, nil
}

// List returns the deliveries with status s, oldest first, at most limit
// of them (limit ≤ 0 means all). List(ctx, StatusDead, 0) is the dead-letter
// queue.
func (o *Outbox) List(ctx context.Context, s Status, limit int) ([]Delivery, error) {
	query, args := selectDelivery+` WHERE status = $1 ORDER BY id`, []any{string(s)}
	if limit > 0 {
		query, args = query+` LIMIT $2`, append(args, limit)
	}
	rows, err := o.store.DB().QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("webhookretry: list %s deliveries: %w", s, err)
	}
	defer rows.Close()
	var out []Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, fmt.Errorf("webhookretry: list %s deliveries: %w", s, err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("webhookretry: list %s deliveries: %w", s, err)
	}
	return out, nil
}

func scanDelivery(row interface{ Scan(...any) error }) (Delivery, error) {
	var d Delivery
	var status string
	var next, token, created int64
	var claimedUntil, delivered sql.NullInt64
	err := row.Scan(&d.ID, &d.URL, &d.Payload, &d.IdempotencyKey, &status, &d.Attempts, &next,
		&token, &claimedUntil, &d.LastStatusCode, &d.LastError, &created, &delivered)
	if err != nil {
		return d, err
	}
	d.Status, d.ClaimToken = Status(status), uint64(token)
	d.NextAttemptAt, d.CreatedAt = time.Unix(0, next), time.Unix(0, created)
	if claimedUntil.Valid {
		d.ClaimedUntil = time.Unix(0, claimedUntil.Int64)
	}
	if delivered.Valid {
		d.DeliveredAt = time.Unix(0, delivered.Int64)
	}
	return d, nil
}
