package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// EveryOption configures [Every]. Options are applied in order at
// construction; a bad value makes every Start of the job return an error
// naming it. Every also takes each [RunOption].
type EveryOption interface{ applyEvery(*config) }

// everyOption is an EveryOption made of the function that applies it.
type everyOption func(*config)

func (o everyOption) applyEvery(c *config) { o(c) }

// config is what the options of Every and Run set.
type config struct {
	name       string
	onError    func(context.Context, error)
	jitter     float64       // Every only
	immediate  bool          // Every only
	runTimeout time.Duration // Every only
	err        error         // bad option values, joined
}

func (c *config) fail(err error) { c.err = errors.Join(c.err, err) }

// WithJitter spreads the runs: each period is the interval times a factor
// drawn uniformly from [1-fraction, 1+fraction], so replicas that started
// together drift apart while the mean period stays the interval. fraction
// must be in [0, 1); the default is 0 (no jitter).
func WithJitter(fraction float64) EveryOption {
	return everyOption(func(c *config) {
		if !(fraction >= 0 && fraction < 1) { // false for NaN too
			c.fail(fmt.Errorf("jobs: WithJitter(%v): fraction must be in [0, 1)", fraction))
			return
		}
		c.jitter = fraction
	})
}

// WithImmediate makes the first run start as soon as Start returns, instead
// of one interval later.
func WithImmediate() EveryOption {
	return everyOption(func(c *config) { c.immediate = true })
}

// WithRunTimeout bounds each run: the function's context ends d after the
// run began (and at Stop, as always). d must be positive; by default runs
// have no timeout of their own.
func WithRunTimeout(d time.Duration) EveryOption {
	return everyOption(func(c *config) {
		if d <= 0 {
			c.fail(fmt.Errorf("jobs: WithRunTimeout(%v): timeout must be positive", d))
			return
		}
		c.runTimeout = d
	})
}
