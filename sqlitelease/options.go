package sqlitelease

import (
	"fmt"
	"time"
)

// Defaults of the options of [Open].
const (
	// DefaultBusyTimeout is how long SQLite itself waits for another
	// connection's write lock before it reports the database busy. The store
	// retries a busy lease operation after that, within the caller's context.
	DefaultBusyTimeout = 5 * time.Second
	// DefaultWatchInterval is how often the store checks the file for
	// releases and new terms by other processes, and on Linux the liveness
	// of their holders, while someone watches leases (see
	// [Store.WatchLease] and [Store.WatchRelease]), if nothing wakes it
	// sooner: 250 ms on Linux, where every new term, release and holder
	// death does; 20 ms elsewhere.
	DefaultWatchInterval = defaultWatchInterval
)

// An Option configures [Open]. Options are values: the same Option may be
// given to any number of Open calls.
type Option interface{ apply(*config) }

// config is what the options set.
type config struct {
	allowNetworkFS bool
	busyTimeout    time.Duration
	watchInterval  time.Duration
}

func defaultConfig() config {
	return config{busyTimeout: DefaultBusyTimeout, watchInterval: DefaultWatchInterval}
}

// validate returns an error naming the first bad value.
func (c config) validate() error {
	if c.busyTimeout < 0 {
		return fmt.Errorf("sqlitelease: busy timeout %v is negative", c.busyTimeout)
	}
	if c.watchInterval <= 0 {
		return fmt.Errorf("sqlitelease: watch interval %v must be positive", c.watchInterval)
	}
	return nil
}

// AllowNetworkFS lets [Open] use a file on a network filesystem (NFS,
// SMB/CIFS, FUSE). Without it such a path is refused, because SQLite's
// locking and WAL shared memory are unreliable there and two hosts could
// both believe they lead. Use it only when a single host opens the file.
func AllowNetworkFS() Option { return allowNetworkFS{} }

type allowNetworkFS struct{}

func (allowNetworkFS) apply(c *config) { c.allowNetworkFS = true }

// WithBusyTimeout sets SQLite's busy_timeout on every connection: how long a
// statement waits for another connection's lock before SQLite gives up with
// SQLITE_BUSY. Lease operations retry after that within their context, so
// callers never see SQLITE_BUSY from them; job statements on [Store.DB] do
// see it once d has passed. Zero makes SQLite report busy at once. SQLite
// counts whole milliseconds up to 2^31−1 (about 24.8 days): d is rounded up
// and capped there. Default [DefaultBusyTimeout]; a negative d makes Open
// fail.
func WithBusyTimeout(d time.Duration) Option { return busyTimeout(d) }

type busyTimeout time.Duration

func (o busyTimeout) apply(c *config) { c.busyTimeout = time.Duration(o) }

// WithWatchInterval sets how often the store polls the file for releases
// and new terms by other processes while candidates watch leases, and on
// Linux tests the liveness of their holders. Outside Linux the
// cross-process handoff latency is about one interval. On Linux the
// liveness file wakes the poller at once for each of those events (see
// [Store.WatchLease]), and the interval only bounds what a missed wake-up
// could cost. Each poll is one point read of two counters and one
// non-blocking lock test per distinct holder; the watched leases are read
// only when they changed. Default [DefaultWatchInterval]; d must be
// positive.
func WithWatchInterval(d time.Duration) Option { return watchInterval(d) }

type watchInterval time.Duration

func (o watchInterval) apply(c *config) { c.watchInterval = time.Duration(o) }
