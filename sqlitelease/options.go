package sqlitelease

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/leaderaware/leaderaware/internal/clock"
)

// Defaults of the options of [Open].
const (
	// DefaultBusyTimeout is SQLite's default busy_timeout (see [WithBusyTimeout]).
	DefaultBusyTimeout = 5 * time.Second
	// DefaultWatchInterval is the default of [WithWatchInterval]: 250 ms on
	// Linux, where the liveness file wakes the store for every change, 20 ms
	// elsewhere.
	DefaultWatchInterval = defaultWatchInterval
)

// An Option configures [Open]; the same Option may be given to many Opens.
type Option interface{ apply(*config) }

type config struct {
	allowNetworkFS bool
	busyTimeout    time.Duration
	watchInterval  time.Duration
	logger         *slog.Logger // nil: slog.Default when a line is written
	clock          clock.Clock  // nil: clock.System
}

func defaultConfig() config {
	return config{busyTimeout: DefaultBusyTimeout, watchInterval: DefaultWatchInterval}
}

func (c config) validate() error {
	if c.busyTimeout < 0 {
		return fmt.Errorf("sqlitelease: busy timeout %v is negative", c.busyTimeout)
	}
	if c.watchInterval <= 0 {
		return fmt.Errorf("sqlitelease: watch interval %v must be positive", c.watchInterval)
	}
	return nil
}

// AllowNetworkFS lets [Open] use a file on a network filesystem, where
// SQLite's locks are unreliable and two hosts could both lead: use it only
// when a single host ever opens the file.
func AllowNetworkFS() Option { return allowNetworkFS{} }

type allowNetworkFS struct{}

func (allowNetworkFS) apply(c *config) { c.allowNetworkFS = true }

// WithBusyTimeout sets SQLite's busy_timeout on every connection, rounded up
// to whole milliseconds and capped at 2^31−1. Lease operations retry a busy
// database within their context; job statements on [Store.DB] see
// SQLITE_BUSY after d. Default [DefaultBusyTimeout]; d must not be negative.
func WithBusyTimeout(d time.Duration) Option { return busyTimeout(d) }

type busyTimeout time.Duration

func (o busyTimeout) apply(c *config) { c.busyTimeout = time.Duration(o) }

// WithWatchInterval sets how often [Store.Notify] reads the file's counters
// of new and released terms: the cross-process wake-up latency outside
// Linux, and on Linux what a missed inotify event could cost. d must be
// positive.
func WithWatchInterval(d time.Duration) Option { return watchInterval(d) }

type watchInterval time.Duration

func (o watchInterval) apply(c *config) { c.watchInterval = time.Duration(o) }

// WithLogger sets where the store writes its lines (the file it opened, a
// replaced file, a liveness file it cannot watch); nil means [slog.Default].
func WithLogger(l *slog.Logger) Option { return loggerOption{l} }

type loggerOption struct{ l *slog.Logger }

func (o loggerOption) apply(c *config) { c.logger = o.l }

// log returns the logger of the store's lines.
func (c config) log() *slog.Logger {
	if c.logger != nil {
		return c.logger
	}
	return slog.Default()
}

// WithClock makes the Store floor its tokens and versions by c's wall clock
// and its electors measure time on c, instead of the machine's clocks. The
// clock package is internal: only this module's tests name one, to step the
// wall clock and simulate a suspend.
func WithClock(c clock.Clock) Option { return clockOption{c} }

type clockOption struct{ c clock.Clock }

func (o clockOption) apply(c *config) { c.clock = o.c }

// clockCarrier carries a Store's clock to its electors: an alias, so that
// the embedded field is unexported.
type clockCarrier = clock.Carrier
