package airdropexpiry

import (
	"context"
	"fmt"
	"time"

	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/jobconfig"
)

// Defaults of [Config].
const (
	DefaultInterval  = time.Minute
	DefaultBatchSize = 500
	DefaultTimeout   = 5 * time.Minute
)

// Config configures [New]. The zero value is usable: every field has a
// default.
type Config struct {
	// Interval is the time from the start of one expiry pass to the start
	// of the next. Default DefaultInterval (one minute); must not be
	// negative.
	Interval time.Duration
	// Jitter spreads passes by up to this fraction of Interval either way
	// (see jobs.WithJitter). Default 0; must be in [0, 1).
	Jitter float64
	// BatchSize is the most airdrops one fenced transaction expires. A
	// pass runs batches until one expires fewer than BatchSize. Default
	// DefaultBatchSize (500); must not be negative.
	BatchSize int
	// Timeout bounds one pass (all its batches). Default DefaultTimeout
	// (5 minutes); must not be negative.
	Timeout time.Duration
	// Now is the clock compared with deadlines and stamped into claimed_at
	// and expired_at. Default time.Now.
	Now func() time.Time
	// OnError receives the error of every failed pass. Default: log it with
	// slog.Default at level Error.
	OnError func(ctx context.Context, err error)
	// OnPass, if set, receives the number of airdrops every periodic pass
	// that succeeded expired (0 when none was due), on the job's goroutine;
	// ctx carries the term of the pass (elector.LeaseFromContext gives its
	// token).
	OnPass func(ctx context.Context, expired int)
}

func (c Config) withDefaults() (Config, error) {
	if err := jobconfig.Duration("airdropexpiry", "Interval", &c.Interval, DefaultInterval); err != nil {
		return c, err
	}
	if err := jobconfig.Jitter("airdropexpiry", c.Jitter); err != nil {
		return c, err
	}
	if c.BatchSize < 0 {
		return c, fmt.Errorf("airdropexpiry: BatchSize %d is negative", c.BatchSize)
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if err := jobconfig.Duration("airdropexpiry", "Timeout", &c.Timeout, DefaultTimeout); err != nil {
		return c, err
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}
