package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leaderaware/leaderaware/jobs/internal/jobconfig"
)

// EveryOption configures [Every]. Options are applied in order at
// construction; a bad value makes every Start of the job return an error
// naming it.
type EveryOption interface {
	apply(*everyConfig)
	String() string
}

type everyConfig struct {
	name       string
	jitter     float64
	immediate  bool
	runTimeout time.Duration
	onError    func(context.Context, error)
	err        error // bad option values, joined
}

func (c *everyConfig) fail(err error) { c.err = errors.Join(c.err, err) }

// WithJitter spreads the runs: each period is the interval times a factor
// drawn uniformly from [1-fraction, 1+fraction], so replicas that started
// together drift apart while the mean period stays the interval. fraction
// must be in [0, 1); the default is 0 (no jitter).
func WithJitter(fraction float64) EveryOption { return jitterOption(fraction) }

type jitterOption float64

func (o jitterOption) apply(c *everyConfig) {
	f := float64(o)
	if !jobconfig.ValidJitter(f) {
		c.fail(fmt.Errorf("jobs: WithJitter(%v): fraction must be in [0, 1)", f))
		return
	}
	c.jitter = f
}

func (o jitterOption) String() string { return fmt.Sprintf("jobs.WithJitter(%v)", float64(o)) }

// WithImmediate makes the first run start as soon as Start returns, instead
// of one interval later.
func WithImmediate() EveryOption { return immediateOption{} }

type immediateOption struct{}

func (immediateOption) apply(c *everyConfig) { c.immediate = true }
func (immediateOption) String() string       { return "jobs.WithImmediate()" }

// WithErrorHandler sets the function that receives every error the job's
// function returns, and a *[PanicError] for every panic. It runs on the
// job's goroutine with the run context, between runs, so it delays the next
// run while it runs. The default logs each error with [slog.Default] at
// level Error. A nil h keeps the default.
func WithErrorHandler(h func(ctx context.Context, err error)) EveryOption {
	return errorHandlerOption{h}
}

type errorHandlerOption struct {
	h func(context.Context, error)
}

func (o errorHandlerOption) apply(c *everyConfig) {
	if o.h != nil {
		c.onError = o.h
	}
}

func (o errorHandlerOption) String() string { return "jobs.WithErrorHandler(...)" }

// WithRunTimeout bounds each run: the function's context ends d after the
// run began (and at Stop, as always). d must be positive; by default runs
// have no timeout of their own.
func WithRunTimeout(d time.Duration) EveryOption { return runTimeoutOption(d) }

type runTimeoutOption time.Duration

func (o runTimeoutOption) apply(c *everyConfig) {
	if o <= 0 {
		c.fail(fmt.Errorf("jobs: WithRunTimeout(%v): timeout must be positive", time.Duration(o)))
		return
	}
	c.runTimeout = time.Duration(o)
}

func (o runTimeoutOption) String() string {
	return fmt.Sprintf("jobs.WithRunTimeout(%v)", time.Duration(o))
}

// WithName names the job in its errors and in the default error log. The
// default is "every <interval>".
func WithName(name string) EveryOption { return nameOption(name) }

type nameOption string

func (o nameOption) apply(c *everyConfig) {
	if o != "" {
		c.name = string(o)
	}
}

func (o nameOption) String() string { return fmt.Sprintf("jobs.WithName(%q)", string(o)) }
