package elector

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"time"
)

// Default timings of [Config].
const (
	DefaultTTL           = 15 * time.Second
	DefaultRetryInterval = 2 * time.Second
)

// Config sets the timings and identity of a [LeaseElector]. The zero value is
// valid: every zero field takes its default.
type Config struct {
	// TTL is how long a lease lives without renewal, by the store's clock.
	// A crashed leader is replaced within TTL + RetryInterval. Default 15s.
	TTL time.Duration
	// RenewInterval is how often the holder renews its lease; after a failed
	// renewal it retries sooner. It must leave room for at least two renewal
	// attempts inside the trust window, TTL minus the safety margin (TTL/10):
	// 2 × RenewInterval ≤ TTL − TTL/10. Default TTL/3.
	RenewInterval time.Duration
	// RetryInterval is how often a candidate retries to acquire a held lease
	// when it is not woken earlier. Each wait is jittered between half of it
	// and all of it. Default 2s.
	RetryInterval time.Duration
	// Holder names this candidate in the store. Candidates for one lease
	// name must have different holders: two electors with one holder name
	// are one candidate to the store. Electors of different lease names may
	// share one (one holder per replica). Default host-pid-random, unique
	// per elector.
	Holder string
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
	if c.RenewInterval <= 0 {
		return c, fmt.Errorf("elector: Config.TTL %v is too short to derive a renew interval", c.TTL)
	}
	if c.TTL <= c.RenewInterval {
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

// DefaultHolder returns a holder name unique to this call: host-pid-random.
func DefaultHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
