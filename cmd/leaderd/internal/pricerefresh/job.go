package pricerefresh

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/jobdb"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/jobs"
)

// tables creates the job's table, pricerefresh_prices.
var tables = jobdb.Tables{
	jobdb.SQLite: {`CREATE TABLE IF NOT EXISTS pricerefresh_prices (
	symbol     TEXT PRIMARY KEY,
	price      REAL NOT NULL,
	fetched_at INTEGER NOT NULL, -- Unix nanoseconds
	token      INTEGER NOT NULL  -- fencing token of the writing term
) STRICT`},
	jobdb.PostgreSQL: {`CREATE TABLE IF NOT EXISTS pricerefresh_prices (
	symbol     text PRIMARY KEY,
	price      double precision NOT NULL,
	fetched_at bigint NOT NULL, -- Unix nanoseconds
	token      bigint NOT NULL  -- fencing token of the writing term
)`},
}

const upsert = `INSERT INTO pricerefresh_prices (symbol, price, fetched_at, token)
VALUES ($1, $2, $3, $4)
ON CONFLICT (symbol) DO UPDATE SET
	price = excluded.price, fetched_at = excluded.fetched_at, token = excluded.token`

// Job refreshes prices periodically. It is a plain job (Start/Stop) built on
// jobs.Every: one goroutine between Start and Stop, restartable. Its writes
// are fenced by the term that the Start context carries.
type Job struct {
	store jobdb.FencedStore
	src   PriceSource
	cfg   Config
	every *jobs.EveryJob
}

// New creates the job's table if it does not exist (using store.DB and
// ctx), on SQLite or PostgreSQL, and returns the job. It validates cfg;
// errors name the bad value.
func New(ctx context.Context, store jobdb.FencedStore, src PriceSource, cfg Config) (*Job, error) {
	if store == nil {
		return nil, errors.New("pricerefresh: nil store")
	}
	if src == nil {
		return nil, errors.New("pricerefresh: nil price source")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := jobdb.Create(ctx, store.DB(), "pricerefresh", tables); err != nil {
		return nil, err
	}
	j := &Job{store: store, src: src, cfg: cfg}
	opts := []jobs.EveryOption{
		jobs.WithName("pricerefresh"),
		jobs.WithJitter(cfg.Jitter),
		jobs.WithRunTimeout(cfg.Timeout),
		jobs.WithErrorHandler(cfg.OnError),
	}
	if !cfg.WaitFirst {
		opts = append(opts, jobs.WithImmediate())
	}
	j.every = jobs.Every(cfg.Interval, j.pass, opts...)
	return j, nil
}

// Start starts refreshing every Config.Interval until Stop. ctx must carry
// the leader term (the decorator provides it); the job keeps its values but
// not its cancellation. See jobs.EveryJob.Start.
func (j *Job) Start(ctx context.Context) error { return j.every.Start(ctx) }

// Stop stops refreshing and waits for a refresh in progress, bounded by
// ctx. See jobs.EveryJob.Stop.
func (j *Job) Stop(ctx context.Context) error { return j.every.Stop(ctx) }

// LastRun reports the last pass, for the status page. See jobs.EveryJob.LastRun.
func (j *Job) LastRun() jobs.RunReport { return j.every.LastRun() }

// pass is one periodic refresh, reported to Config.OnPass if it succeeds.
func (j *Job) pass(ctx context.Context) error {
	prices, err := j.refresh(ctx)
	if err == nil && j.cfg.OnPass != nil {
		j.cfg.OnPass(ctx, prices)
	}
	return err
}

// Refresh fetches prices once and upserts them, stamped with Config.Now and
// the term's token, in one fenced transaction: all of them or none. ctx must
// carry a term (error wrapping elector.ErrNoTerm otherwise, before anything
// is fetched); if the term is no longer current the error wraps
// elector.ErrLeaseLost and nothing is written.
func (j *Job) Refresh(ctx context.Context) error {
	_, err := j.refresh(ctx)
	return err
}

// refresh is Refresh that returns the prices it stored.
func (j *Job) refresh(ctx context.Context) ([]Price, error) {
	t, ok := elector.TermFromContext(ctx)
	if !ok {
		return nil, fmt.Errorf("pricerefresh: refresh: %w", elector.ErrNoTerm)
	}
	prices, err := j.src.Prices(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkPrices(prices); err != nil {
		return nil, fmt.Errorf("pricerefresh: price source returned bad prices: %w", err)
	}
	fetchedAt := j.cfg.Now()
	err = j.store.Fenced(ctx, func(ctx context.Context, tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, upsert)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, p := range prices {
			if _, err := stmt.ExecContext(ctx, p.Symbol, p.Value, fetchedAt.UnixNano(), int64(t.Token())); err != nil {
				return fmt.Errorf("upsert %q: %w", p.Symbol, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pricerefresh: store %d prices: %w", len(prices), err)
	}
	return prices, nil
}

// Latest returns the stored prices in symbol order. It reads through
// store.DB and needs no term: any replica may call it.
func (j *Job) Latest(ctx context.Context) ([]Quote, error) {
	rows, err := j.store.DB().QueryContext(ctx,
		`SELECT symbol, price, fetched_at, token FROM pricerefresh_prices ORDER BY symbol`)
	if err != nil {
		return nil, fmt.Errorf("pricerefresh: read prices: %w", err)
	}
	defer rows.Close()
	var out []Quote
	for rows.Next() {
		var q Quote
		var at, tok int64
		if err := rows.Scan(&q.Symbol, &q.Value, &at, &tok); err != nil {
			return nil, fmt.Errorf("pricerefresh: read prices: %w", err)
		}
		q.FetchedAt, q.Token = time.Unix(0, at), uint64(tok)
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pricerefresh: read prices: %w", err)
	}
	return out, nil
}
