package pricerefresh

import (
	"context"
	"fmt"
	"math"
	"time"
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
}

func (c Config) withDefaults() (Config, error) {
	if c.Interval < 0 {
		return c, fmt.Errorf("pricerefresh: Interval %v is negative", c.Interval)
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if math.IsNaN(c.Jitter) || c.Jitter < 0 || c.Jitter >= 1 {
		return c, fmt.Errorf("pricerefresh: Jitter %v is not in [0, 1)", c.Jitter)
	}
	if c.Timeout < 0 {
		return c, fmt.Errorf("pricerefresh: Timeout %v is negative", c.Timeout)
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}
