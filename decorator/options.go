package decorator

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// Defaults of the options.
const (
	DefaultStartTimeout = 15 * time.Second // see [WithStartTimeout]
	DefaultStopTimeout  = 15 * time.Second // see [WithStopTimeout]
	DefaultBackoffMin   = 1 * time.Second  // see [WithBackoff]
	DefaultBackoffMax   = 30 * time.Second // see [WithBackoff]
)

// Option configures [Decorate]. Options are values: one Option may be passed
// to many Decorate calls.
type Option interface{ apply(*config) }

// option is an Option made of the function that applies it.
type option func(*config)

func (o option) apply(c *config) { o(c) }

// config is what the options set; Decorate turns it into an immutable job.
type config struct {
	hooks        []Hooks
	mws          []Middleware
	logger       *slog.Logger
	observer     elector.Observer
	startTimeout time.Duration
	stopTimeout  time.Duration
	backoffMin   time.Duration
	backoffMax   time.Duration
	errs         []error // bad option values; Start returns them
}

func newConfig(opts []Option) config {
	c := config{
		logger:       slog.Default(),
		startTimeout: DefaultStartTimeout,
		stopTimeout:  DefaultStopTimeout,
		backoffMin:   DefaultBackoffMin,
		backoffMax:   DefaultBackoffMax,
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

// fail records a bad option value; format starts with the option's call.
func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("decorator: "+format, args...))
}

// WithHooks adds h to the hooks of the decorated job. Several WithHooks
// compose: each hook runs in the order the options were given. Nil fields
// are skipped.
func WithHooks(h Hooks) Option {
	return option(func(c *config) { c.hooks = append(c.hooks, h) })
}

// WithMiddleware wraps the inner job in mws, inside the leader gate: the
// middleware see only the Start and Stop calls of terms this replica leads.
// The first middleware is the outermost. Several WithMiddleware append in
// order. Nil middleware are skipped.
func WithMiddleware(mws ...Middleware) Option {
	mws = slices.Clone(mws)
	return option(func(c *config) { c.mws = append(c.mws, mws...) })
}

// WithLogger sets the logger of the decorated job: it logs elections and
// resignations at Info, other demotions at Warn, and errors at Error when no
// OnError hook is set, each with the lease, holder and token; and, at Info,
// each new holder of the lease other than this replica ("waiting for lease
// X, held by Y (token T)"), when the elector tells them (as
// [elector.LeaseElector.WatchLeader] does). The
// default is [slog.Default] at the time of Decorate. A nil logger is a bad
// value: Start returns an error.
func WithLogger(l *slog.Logger) Option {
	return option(func(c *config) {
		if l == nil {
			c.fail("WithLogger(nil): the logger is nil")
			return
		}
		c.logger = l
	})
}

// WithObserver sets the observer of the decorated job. It reports, with the
// lease name, holder and token of the term:
//
//   - [elector.EventElected] when this replica won a term, before OnElected
//     (with Trust if the term tells it, by a method
//     TrustRemaining() time.Duration; else 0);
//   - [elector.EventJobStart] and [elector.EventJobStop] when the inner Start
//     or Stop returned: Duration of the call, Result ok or error, and Err.
//     An inner Stop that is tried again is reported twice, and one that
//     never returns, never;
//   - [elector.EventDemoted] once the term is settled, before OnDemoted:
//     exactly one per EventElected. Cause is [elector.CauseStartFailed] if the
//     inner Start failed, and otherwise [elector.CauseOf] the term's error
//     (resigned, lost, expired, abandoned or store error); Err is the cause
//     unless resigned.
//
// The inner job's contexts carry o ([elector.ContextWithObserver]), so that
// its store's fenced writes ([elector.ObserveFenced]) report to it too.
// Campaigns and store calls are the elector's to report: give it the same
// observer ([elector.Config.Observer]).
//
// Observe is called synchronously, on the decorated job's goroutine, and
// must return quickly and never block: the job waits for it between taking
// a term and starting, and between stopping and freeing the lease. A nil o
// sets none; the last WithObserver wins. Without an observer, nothing is
// reported and nothing is allocated for it.
func WithObserver(o elector.Observer) Option {
	return option(func(c *config) { c.observer = o })
}

// WithStartTimeout bounds OnElected and the inner job's Start together,
// counted from the moment a term is won; the inner Start's context ends then.
// If they have not returned by then, the term ends and the overrun is
// reported (OnError): the term is resigned if the inner Start has not been
// called yet, and abandoned, its lease left to run out in the store, if the
// inner Start runs. It must be positive. Default 15s.
func WithStartTimeout(d time.Duration) Option {
	return timeout("WithStartTimeout", "start", d, func(c *config) *time.Duration { return &c.startTimeout })
}

// WithStopTimeout bounds how long the inner job may take to stop while its
// term is held, counted from the call of Stop, or from the end of a term that
// ended on its own: it bounds the inner Stop's context and its one retry,
// and if the inner Stop has not returned nil by then, the term is abandoned
// and its lease left to run out in the store. It also bounds each
// resignation, and how long Stop, and a Start waiting for a previous
// campaign, wait before returning an error. It must be positive. Default
// 15s.
func WithStopTimeout(d time.Duration) Option {
	return timeout("WithStopTimeout", "stop", d, func(c *config) *time.Duration { return &c.stopTimeout })
}

// timeout returns the Option named name that sets the timeout field to d,
// which must be positive.
func timeout(name, what string, d time.Duration, field func(*config) *time.Duration) Option {
	return option(func(c *config) {
		if d <= 0 {
			c.fail("%s(%v): the %s timeout %[2]v must be positive", name, d, what)
			return
		}
		*field(c) = d
	})
}

// WithBackoff sets how long the decorated job waits before campaigning again
// after the inner job's Start failed or the elector returned an error. The
// wait doubles after each failure in a row, from min up to max, with jitter;
// every wait lies in [min, max]. It resets after a term whose Start
// succeeded. min must be positive and not above max. Default 1s to 30s.
func WithBackoff(min, max time.Duration) Option {
	return option(func(c *config) {
		switch {
		case min <= 0:
			c.fail("WithBackoff(%v, %v): the minimum backoff %[1]v must be positive", min, max)
		case max < min:
			c.fail("WithBackoff(%v, %v): the maximum backoff %[2]v is below the minimum %[1]v", min, max)
		default:
			c.backoffMin, c.backoffMax = min, max
		}
	})
}
