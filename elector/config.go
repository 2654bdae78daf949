package elector

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"time"
)

// Default timings of [Config].
const (
	DefaultTTL           = 15 * time.Second
	DefaultRetryInterval = 2 * time.Second
)

// Limits of [Config] timings. A TTL below MinTTL is shorter than a store
// call can be counted on to take; a timing above MaxTTL is a mistake (a
// crashed leader would be replaced a day later).
const (
	MinTTL           = 100 * time.Millisecond
	MaxTTL           = 24 * time.Hour
	MinRetryInterval = time.Millisecond
)

// Config sets the timings and identity of a [LeaseElector]. The zero value is
// valid: every zero field takes its default.
//
// Every store call the elector makes has a deadline: TryAcquire and the
// Release of a term acquired too slowly are bounded by the trust window
// (TTL − TTL/10), since a call that takes longer could not be trusted; each
// Renew attempt by RenewInterval, so that one stuck on a dead connection
// leaves time to retry. A holder whose renewals hang loses its term when the
// window closes, whether or not the store returns. Release by [Term.Resign]
// is bounded by its ctx.
type Config struct {
	// TTL is how long a lease lives without renewal: a candidate takes the
	// lease over after it has seen it unchanged for the holder's TTL, on its
	// own clock. A candidate that was watching replaces a crashed leader
	// within TTL + RetryInterval of its last renewal; one that starts fresh
	// waits one TTL. MinTTL to MaxTTL; default 15s.
	TTL time.Duration
	// RenewInterval is how often the holder renews its lease; after a failed
	// renewal it retries sooner. It must leave room for at least two renewal
	// attempts inside the trust window, TTL minus the safety margin (TTL/10):
	// 2 × RenewInterval ≤ TTL − TTL/10. Default TTL/3.
	RenewInterval time.Duration
	// RetryInterval is how often a waiting candidate reads a held lease to
	// see whether its holder still renews it, when it is not woken earlier
	// (by a release, or by the end of its watch), and at most SafetyMargin(TTL)/2
	// (see [LeaseElector.Campaign]). Each wait is jittered between half of it
	// and all of it. MinRetryInterval to MaxTTL; default 2s.
	RetryInterval time.Duration
	// Holder names this candidate in the store. Candidates for one lease
	// name must have different holders: two electors with one holder name
	// are one candidate to the store. Electors of different lease names may
	// share one (one holder per replica). Default [DefaultHolder]: one name
	// per process, so give each candidate of one lease in one process its
	// own.
	Holder string
	// Observer, if set, receives the elector's store calls and campaign
	// results (see [Observer]).
	Observer Observer
	// Placer, if set, decides when this candidate tries to take the lease
	// and when its holder hands it to another candidate (see [Placer]).
	Placer Placer
}

// SafetyMargin returns the part of ttl a holder does not trust: it ends its
// term at (start of its last successful acquire or renew) + ttl − margin, so
// that its job stops before the store lets anyone else acquire.
func SafetyMargin(ttl time.Duration) time.Duration { return ttl / 10 }

// Validate returns nil if [New] would accept c, and otherwise the error New
// would return, naming the bad value.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// withDefaults returns c with zero fields set to their defaults, or an error
// naming the first bad value.
func (c Config) withDefaults() (Config, error) {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"TTL", c.TTL}, {"RenewInterval", c.RenewInterval}, {"RetryInterval", c.RetryInterval}} {
		if f.d < 0 {
			return c, fmt.Errorf("elector: Config.%s %v is negative", f.name, f.d)
		}
		if f.d > MaxTTL {
			return c, fmt.Errorf("elector: Config.%s %v is over the limit of %v; a timing that long is a mistake", f.name, f.d, MaxTTL)
		}
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.RenewInterval == 0 {
		c.RenewInterval = c.TTL / 3
	}
	if c.RetryInterval == 0 {
		c.RetryInterval = DefaultRetryInterval
	}
	if c.TTL < MinTTL {
		return c, fmt.Errorf("elector: Config.TTL %v is below the floor of %v: no store can renew a lease that fast", c.TTL, MinTTL)
	}
	if c.RetryInterval < MinRetryInterval {
		return c, fmt.Errorf("elector: Config.RetryInterval %v is below the floor of %v", c.RetryInterval, MinRetryInterval)
	}
	if c.RenewInterval <= 0 || c.TTL <= c.RenewInterval {
		return c, fmt.Errorf("elector: Config.TTL %v must be longer than RenewInterval %v", c.TTL, c.RenewInterval)
	}
	trust := c.TTL - SafetyMargin(c.TTL)
	if c.RenewInterval > trust/2 { // 2 × RenewInterval ≤ trust, without overflow
		return c, fmt.Errorf("elector: Config.RenewInterval %v leaves room for fewer than two renewals in the trust window %v (TTL %v minus margin %v)",
			c.RenewInterval, trust, c.TTL, SafetyMargin(c.TTL))
	}
	if c.Holder == "" {
		c.Holder = DefaultHolder()
	}
	if err := validName("Config.Holder", c.Holder); err != nil {
		return c, err
	}
	return c, nil
}

// DefaultHolder returns this process's holder name, host-pid-random, the
// same on every call.
func DefaultHolder() string { return defaultHolder() }

var defaultHolder = sync.OnceValue(func() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
})
