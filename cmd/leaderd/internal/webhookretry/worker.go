package webhookretry

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/jobs"
)

// maxDrain is how much of a response body the worker reads (and discards)
// so the connection can be reused.
const maxDrain = 64 << 10

// deadLetterStale dead-letters deliveries that have used all their
// attempts but are not dead yet: in flight with an expired claim (the
// outcome of the last attempt is unknown), or pending after MaxAttempts was
// lowered. $1 now, $2 MaxAttempts.
const deadLetterStale = `UPDATE webhookretry_deliveries
SET status = 'dead', claimed_until = NULL,
	last_error = CASE WHEN status = 'inflight'
		THEN 'claim of attempt ' || attempts || ' expired; its outcome is unknown'
		ELSE last_error END
WHERE attempts >= $2 AND (status = 'pending' OR (status = 'inflight' AND claimed_until <= $1))`

// claimOne claims the delivery due first: pending and due, or in flight
// with an expired claim. $1 token, $2 claimed until, $3 now, $4 MaxAttempts.
const claimOne = `UPDATE webhookretry_deliveries
SET status = 'inflight', attempts = attempts + 1, claim_token = $1, claimed_until = $2
WHERE id = (
	SELECT id FROM webhookretry_deliveries
	WHERE attempts < $4
		AND ((status = 'pending' AND next_attempt_at <= $3) OR (status = 'inflight' AND claimed_until <= $3))
	ORDER BY next_attempt_at, id
	LIMIT 1
)
RETURNING id, url, payload, idempotency_key, attempts`

// finish records the outcome of the attempt that the claim ($5 id, $6
// token, $7 attempts) made, if that claim still holds. $1 status, $2 next
// attempt at, $3 status code, $4 error text, $8 delivered at (or NULL).
const finish = `UPDATE webhookretry_deliveries
SET status = $1, next_attempt_at = $2, last_status_code = $3, last_error = $4,
	claimed_until = NULL, delivered_at = $8
WHERE id = $5 AND status = 'inflight' AND claim_token = $6 AND attempts = $7`

// errClaimTakenOver is returned (wrapped) when a worker records an attempt
// whose claim another worker has taken over since; the result is dropped.
var errClaimTakenOver = errors.New("claim taken over")

// Worker sends the deliveries of an [Outbox]. It is a plain job
// (Start/Stop) built on jobs.Every: between Start and Stop, one goroutine
// runs [Worker.Deliver] every Config.Interval, starting at once. Every
// write it makes is fenced by the term that the Start context carries.
type Worker struct {
	o     *Outbox
	every *jobs.EveryJob
	rand  func() float64 // backoff jitter in [0, 1)
}

func newWorker(o *Outbox) *Worker {
	w := &Worker{o: o, rand: rand.Float64}
	w.every = jobs.Every(o.cfg.Interval, w.run,
		jobs.WithName("webhookretry"),
		jobs.WithJitter(o.cfg.Jitter),
		jobs.WithImmediate(),
		jobs.WithErrorHandler(o.cfg.OnError),
	)
	return w
}

// Start starts the worker. ctx must carry the leader term (the decorator
// provides it); the worker keeps its values but not its cancellation. See
// jobs.EveryJob.Start.
func (w *Worker) Start(ctx context.Context) error { return w.every.Start(ctx) }

// Stop stops the worker and waits for a pass in progress, bounded by ctx.
// A request in flight is cancelled and recorded as a failed attempt. See
// jobs.EveryJob.Stop.
func (w *Worker) Stop(ctx context.Context) error { return w.every.Stop(ctx) }

// LastRun reports the last pass, for the status page. See jobs.EveryJob.LastRun.
func (w *Worker) LastRun() jobs.RunReport { return w.every.LastRun() }

// run is one periodic pass, reported to Config.OnPass if it succeeds.
func (w *Worker) run(ctx context.Context) error {
	n, err := w.Deliver(ctx)
	if err == nil && w.o.cfg.OnPass != nil {
		w.o.cfg.OnPass(ctx, n)
	}
	return err
}

// claimed is what a claim returns.
type claimed struct {
	id       int64
	url      string
	payload  []byte
	key      string
	attempts int
	token    uint64
}

// Deliver runs one pass: it claims, sends and records due deliveries one at
// a time, until none is due, Config.BatchSize were attempted, or ctx ends.
// It returns how many it attempted. ctx must carry a term (error wrapping
// elector.ErrNoTerm otherwise); once the term is no longer current, the
// next claim or record is refused (error wrapping elector.ErrLeaseLost) and
// the pass ends. Failed deliveries are recorded, not returned as errors.
func (w *Worker) Deliver(ctx context.Context) (int, error) {
	t, ok := elector.TermFromContext(ctx)
	if !ok {
		return 0, fmt.Errorf("webhookretry: deliver: %w", elector.ErrNoTerm)
	}
	n := 0
	for n < w.o.cfg.BatchSize {
		if err := ctx.Err(); err != nil {
			return n, fmt.Errorf("webhookretry: deliver: stopped after %d: %w", n, err)
		}
		d, ok, err := w.claim(ctx, t.Token())
		if err != nil || !ok {
			return n, err
		}
		n++
		code, sendErr := w.send(ctx, d)
		if err := w.record(ctx, d, code, sendErr); err != nil {
			return n, err
		}
	}
	return n, nil
}

// claim marks the delivery due first as in flight for token, in a fenced
// transaction. ok is false if none is due.
func (w *Worker) claim(ctx context.Context, token uint64) (d claimed, ok bool, err error) {
	cfg := w.o.cfg
	now := cfg.Now()
	err = w.o.store.Fenced(ctx, func(ctx context.Context, tx *sql.Tx) error {
		ok = false
		if _, err := tx.ExecContext(ctx, deadLetterStale, now.UnixNano(), cfg.MaxAttempts); err != nil {
			return fmt.Errorf("dead-letter stale claims: %w", err)
		}
		err := tx.QueryRowContext(ctx, claimOne,
			int64(token), now.Add(cfg.ClaimTTL).UnixNano(), now.UnixNano(), cfg.MaxAttempts).
			Scan(&d.id, &d.url, &d.payload, &d.key, &d.attempts)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		ok = true
		return nil
	})
	if err != nil {
		return claimed{}, false, fmt.Errorf("webhookretry: claim: %w", err)
	}
	d.token = token
	return d, ok, nil
}

// send POSTs d once. It returns the HTTP status code (0 without a response)
// and an error unless the status is 2xx.
func (w *Worker) send(ctx context.Context, d claimed) (int, error) {
	cfg := w.o.cfg
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(d.payload))
	if err != nil {
		return 0, fmt.Errorf("POST %s: %w", d.url, err)
	}
	req.Header.Set("Content-Type", cfg.ContentType)
	req.Header.Set(signatureHeader, signature(cfg.Secret, d.payload))
	req.Header.Set(idempotencyKeyHeader, d.key)
	req.Header.Set(attemptHeader, strconv.Itoa(d.attempts))
	resp, err := cfg.Client.Do(req)
	if err != nil {
		return 0, err // a *url.Error naming POST and the URL
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("POST %s: HTTP status %s", d.url, resp.Status)
	}
	return resp.StatusCode, nil
}

// record stores the outcome of d's attempt in a fenced transaction. It
// records even when ctx was cancelled during the request (Stop), bounded by
// Config.Timeout, so the delivery need not wait for its claim to expire;
// the fence still checks the term that ctx carries.
func (w *Worker) record(ctx context.Context, d claimed, code int, sendErr error) error {
	cfg := w.o.cfg
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.Timeout)
	defer cancel()
	now := cfg.Now()
	status, next, errText, deliveredAt := StatusDelivered, now, "", any(now.UnixNano())
	if sendErr != nil {
		errText, deliveredAt = sendErr.Error(), nil
		if d.attempts >= cfg.MaxAttempts {
			status = StatusDead
		} else {
			status = StatusPending
			next = now.Add(backoff(d.attempts, cfg.BaseBackoff, cfg.MaxBackoff, w.rand()))
		}
	}
	err := w.o.store.Fenced(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, finish, string(status), next.UnixNano(), code, errText,
			d.id, int64(d.token), d.attempts, deliveredAt)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return errors.Join(err, errClaimTakenOver)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("webhookretry: record attempt %d of delivery %d as %s: %w", d.attempts, d.id, status, err)
	}
	return nil
}
