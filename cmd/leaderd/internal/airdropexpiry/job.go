package airdropexpiry

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/jobdb"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/jobs"
)

// expireBatch expires up to $3 airdrops due at $1 (now), for token $2.
const expireBatch = `UPDATE airdropexpiry_airdrops SET expired_at = $1, expired_token = $2
WHERE id IN (
	SELECT id FROM airdropexpiry_airdrops
	WHERE claimed_at IS NULL AND expired_at IS NULL AND deadline <= $1
	ORDER BY deadline, id
	LIMIT $3
)`

// Job expires unclaimed airdrops past their deadline every Config.Interval.
// It is a plain job (Start/Stop) built on jobs.Every: one goroutine between
// Start and Stop, restartable; its writes are fenced by the term that the
// Start context carries.
type Job struct {
	store jobdb.FencedStore
	cfg   Config
	every *jobs.EveryJob
}

// New creates the table if it does not exist (using store.DB and ctx), on
// SQLite or PostgreSQL, and returns the job. It validates cfg; errors name
// the bad value.
func New(ctx context.Context, store jobdb.FencedStore, cfg Config) (*Job, error) {
	if store == nil {
		return nil, errors.New("airdropexpiry: nil store")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := jobdb.Create(ctx, store.DB(), "airdropexpiry", tables); err != nil {
		return nil, err
	}
	j := &Job{store: store, cfg: cfg}
	j.every = jobs.Every(cfg.Interval, j.run,
		jobs.WithName("airdropexpiry"),
		jobs.WithJitter(cfg.Jitter),
		jobs.WithRunTimeout(cfg.Timeout),
		jobs.WithErrorHandler(cfg.OnError),
	)
	return j, nil
}

// Start starts expiring every Config.Interval until Stop. ctx must carry
// the leader term (the decorator provides it); the job keeps its values but
// not its cancellation. See jobs.EveryJob.Start.
func (j *Job) Start(ctx context.Context) error { return j.every.Start(ctx) }

// Stop stops the job and waits for a pass in progress, bounded by ctx. A
// pass stops between batches. See jobs.EveryJob.Stop.
func (j *Job) Stop(ctx context.Context) error { return j.every.Stop(ctx) }

// LastRun reports the last pass, for the status page. See jobs.EveryJob.LastRun.
func (j *Job) LastRun() jobs.RunReport { return j.every.LastRun() }

// run is one periodic pass, reported to Config.OnPass if it succeeds.
func (j *Job) run(ctx context.Context) error {
	n, err := j.ExpireDue(ctx)
	if err == nil && j.cfg.OnPass != nil {
		j.cfg.OnPass(ctx, n)
	}
	return err
}

// ExpireDue expires every airdrop that is unclaimed and whose deadline is
// at or before Config.Now (read once, at the call), in batches of at most
// Config.BatchSize, one fenced transaction each, oldest deadline first. It
// stops when a batch expires fewer than BatchSize airdrops, or when ctx ends
// (between batches; the error wraps ctx's). It returns how many it expired,
// also when it fails. If the term is no longer current the error wraps
// elector.ErrLeaseLost and that batch writes nothing.
func (j *Job) ExpireDue(ctx context.Context) (int, error) {
	now := j.cfg.Now().UnixNano()
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("airdropexpiry: expire: stopped after %d: %w", total, err)
		}
		var n int64
		err := j.store.Fenced(ctx, func(ctx context.Context, tx *sql.Tx) error {
			var token int64
			if t, ok := elector.TermFromContext(ctx); ok {
				token = int64(t.Token())
			}
			res, err := tx.ExecContext(ctx, expireBatch, now, token, j.cfg.BatchSize)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		if err != nil {
			return total, fmt.Errorf("airdropexpiry: expire batch after %d: %w", total, err)
		}
		total += int(n)
		if n < int64(j.cfg.BatchSize) {
			return total, nil
		}
	}
}
