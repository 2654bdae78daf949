package mysqllease

import (
	"fmt"
	"time"
)

// Defaults of the options.
const (
	DefaultTable        = "leaderaware_leases"   // the lease table, unless [WithTable]
	DefaultLeaseConns   = 2                      // connections for lease traffic, unless [WithLeaseConns]
	DefaultPollInterval = 250 * time.Millisecond // how often [Store.Notify] polls, unless [WithPollInterval]
)

// Limits of the options.
const (
	maxTableLen   = 64 - len(versionSuffix) // MySQL identifiers are at most 64 characters
	maxLeaseConns = 64
	minPoll       = 10 * time.Millisecond
	maxPoll       = time.Minute
	versionSuffix = "_version"
)

// An Option configures [Open] and [New]. Options are values: they can be
// kept and passed to many stores.
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	table        string
	leaseConns   int
	pollInterval time.Duration
}

func buildOptions(opts []Option) (options, error) {
	o := options{table: DefaultTable, leaseConns: DefaultLeaseConns, pollInterval: DefaultPollInterval}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if err := validTable(o.table); err != nil {
		return o, err
	}
	if o.leaseConns < 1 || o.leaseConns > maxLeaseConns {
		return o, fmt.Errorf("mysqllease: lease connections %d must be between 1 and %d", o.leaseConns, maxLeaseConns)
	}
	if o.pollInterval < minPoll || o.pollInterval > maxPoll {
		return o, fmt.Errorf("mysqllease: poll interval %v must be between %v and %v", o.pollInterval, minPoll, maxPoll)
	}
	return o, nil
}

func validTable(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("mysqllease: table name is empty")
	case len(name) > maxTableLen:
		return fmt.Errorf("mysqllease: table name %q is %d bytes; at most %d are allowed", name, len(name), maxTableLen)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '$') {
			return fmt.Errorf("mysqllease: table name %q has the character %q; use ASCII letters, digits, _ and $", name, r)
		}
	}
	return nil
}

// WithTable names the lease table (default [DefaultTable]) in the DSN's
// database; its schema version lives in the table name + "_version". The
// name is 1–56 ASCII letters, digits, _ or $. Stores that must not see each
// other's leases, such as tests sharing one database, use different tables.
func WithTable(table string) Option { return optionFunc(func(o *options) { o.table = table }) }

// WithLeaseConns sets how many connections carry lease traffic (default
// [DefaultLeaseConns]; 1 to 64): the size of the pool [Open] keeps for
// leases, or how many connections [New] reserves from the caller's pool.
// A lease operation waiting for a row lock (a renewal behind a fenced
// write) holds one of them.
func WithLeaseConns(n int) Option { return optionFunc(func(o *options) { o.leaseConns = n }) }

// WithPollInterval sets how often a Store whose elector waits on leases
// checks the table for acquires and releases (default
// [DefaultPollInterval]; 10ms to 1m), with one statement that reads the
// whole table: how soon a candidate learns of a release made elsewhere.
func WithPollInterval(d time.Duration) Option {
	return optionFunc(func(o *options) { o.pollInterval = d })
}
