package webhookretry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/jobconfig"
)

// Defaults of [Config].
const (
	DefaultInterval    = 5 * time.Second
	DefaultTimeout     = 10 * time.Second
	DefaultMaxAttempts = 8
	DefaultBaseBackoff = 10 * time.Second
	DefaultMaxBackoff  = time.Hour
	DefaultBatchSize   = 100
	DefaultContentType = "application/json"
)

// Config configures [New]. Every field but Secret has a default.
type Config struct {
	// Secret is the HMAC-SHA256 key of the X-Signature header. Required.
	Secret []byte
	// Interval is the time from the start of one worker pass to the start
	// of the next. Default DefaultInterval (5 s); must not be negative.
	Interval time.Duration
	// Jitter spreads passes by up to this fraction of Interval either way
	// (see jobs.WithJitter). Default 0; must be in [0, 1).
	Jitter float64
	// Timeout bounds one HTTP request, body included. Default
	// DefaultTimeout (10 s); must not be negative.
	Timeout time.Duration
	// ClaimTTL is how long a claim keeps other workers off a delivery in
	// flight. It must exceed Timeout, so that a deposed leader's request
	// has ended before anyone may send the delivery again. Default
	// 2×Timeout.
	ClaimTTL time.Duration
	// MaxAttempts is how many attempts a delivery gets before it is dead
	// (dead-lettered). Default DefaultMaxAttempts (8); must not be
	// negative.
	MaxAttempts int
	// BaseBackoff is the backoff after the first failed attempt; it doubles
	// with each further failure up to MaxBackoff. The delay actually used
	// is drawn uniformly from [backoff/2, backoff] ("equal jitter"). Default
	// DefaultBaseBackoff (10 s); must not be negative.
	BaseBackoff time.Duration
	// MaxBackoff caps the backoff. Default DefaultMaxBackoff (one hour);
	// must not be negative or below BaseBackoff.
	MaxBackoff time.Duration
	// BatchSize is the most deliveries one pass attempts; the rest wait for
	// the next pass. Default DefaultBatchSize (100); must not be negative.
	BatchSize int
	// ContentType is the Content-Type of every request. Default
	// DefaultContentType ("application/json").
	ContentType string
	// Client sends the requests; each request is bounded by Timeout through
	// its context anyway. Default: a client that does not follow redirects.
	Client *http.Client
	// Now is the clock for due times, claims and timestamps. Default
	// time.Now.
	Now func() time.Time
	// OnError receives the error of every failed pass (store errors, a
	// refused fenced write). Failed deliveries are not errors of the pass:
	// they are recorded in the delivery. Default: log with slog.Default at
	// level Error.
	OnError func(ctx context.Context, err error)
	// OnPass, if set, receives the number of deliveries attempted by every
	// periodic worker pass that succeeded (0 when none was due), on the
	// worker's goroutine; ctx carries the term of the pass
	// (elector.LeaseFromContext gives its token).
	OnPass func(ctx context.Context, attempted int)
}

func (c Config) withDefaults() (Config, error) {
	if len(c.Secret) == 0 {
		return c, errors.New("webhookretry: empty Secret")
	}
	if err := jobconfig.Duration("webhookretry", "Interval", &c.Interval, DefaultInterval); err != nil {
		return c, err
	}
	if err := jobconfig.Jitter("webhookretry", c.Jitter); err != nil {
		return c, err
	}
	if err := jobconfig.Duration("webhookretry", "Timeout", &c.Timeout, DefaultTimeout); err != nil {
		return c, err
	}
	if err := jobconfig.Duration("webhookretry", "ClaimTTL", &c.ClaimTTL, 2*c.Timeout); err != nil {
		return c, err
	}
	if c.ClaimTTL <= c.Timeout {
		return c, fmt.Errorf("webhookretry: ClaimTTL %v must exceed Timeout %v", c.ClaimTTL, c.Timeout)
	}
	if c.MaxAttempts < 0 {
		return c, fmt.Errorf("webhookretry: MaxAttempts %d is negative", c.MaxAttempts)
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if err := jobconfig.Duration("webhookretry", "BaseBackoff", &c.BaseBackoff, DefaultBaseBackoff); err != nil {
		return c, err
	}
	if err := jobconfig.Duration("webhookretry", "MaxBackoff", &c.MaxBackoff, max(DefaultMaxBackoff, c.BaseBackoff)); err != nil {
		return c, err
	}
	if c.MaxBackoff < c.BaseBackoff {
		return c, fmt.Errorf("webhookretry: MaxBackoff %v is below BaseBackoff %v", c.MaxBackoff, c.BaseBackoff)
	}
	if c.BatchSize < 0 {
		return c, fmt.Errorf("webhookretry: BatchSize %d is negative", c.BatchSize)
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.ContentType == "" {
		c.ContentType = DefaultContentType
	}
	if c.Client == nil {
		c.Client = &http.Client{
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}
