package pricerefresh

import (
	"context"
	"time"

	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/jobconfig"
)

// Defaults of [Config].
const (
	DefaultInterval = time.Minute
	DefaultTimeout  = 30 * time.Second
)

// Config configures [New]. The zero value is usable: every field has a
// default.
type Config struct {
	// Interval is the time from the start of one refresh to the start of
	// the next. Default DefaultInterval (one minute); must not be negative.
	Interval time.Duration
	// Jitter spreads refreshes by up to this fraction of Interval either
	// way (see jobs.WithJitter). Default 0; must be in [0, 1).
	Jitter float64
	// Timeout bounds one refresh, fetch and write together. Default
	// DefaultTimeout (30 s); must not be negative.
	Timeout time.Duration
	// WaitFirst delays the first refresh by one Interval after Start. By
	// default a newly started job (a newly elected leader) refreshes at
	// once.
	WaitFirst bool
	// Now is the clock that stamps fetched prices. Default time.Now.
	Now func() time.Time
	// OnError receives the error of every failed refresh. Default: log it
	// with slog.Default at level Error.
	OnError func(ctx context.Context, err error)
	// OnPass, if set, receives the prices of every periodic refresh that
	// stored them, on the job's goroutine; ctx carries the term that wrote
	// them (elector.LeaseFromContext gives its token).
	OnPass func(ctx context.Context, prices []Price)
}

func (c Config) withDefaults() (Config, error) {
	if err := jobconfig.Duration("pricerefresh", "Interval", &c.Interval, DefaultInterval); err != nil {
		return c, err
	}
	if err := jobconfig.Jitter("pricerefresh", c.Jitter); err != nil {
		return c, err
	}
	if err := jobconfig.Duration("pricerefresh", "Timeout", &c.Timeout, DefaultTimeout); err != nil {
		return c, err
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}
