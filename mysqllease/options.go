package mysqllease

import (
	"fmt"
)

// Defaults of the options.
const (
	// DefaultTable is the lease table unless [WithTable] says otherwise. The
	// schema version lives in DefaultTable + "_version".
	DefaultTable = "leaderaware_leases"
	// DefaultLeaseConns is how many connections carry lease traffic unless
	// [WithLeaseConns] says otherwise.
	DefaultLeaseConns = 2
)

// Limits of the options.
const (
	maxTableLen    = 64 - len(versionSuffix) // MySQL identifiers are at most 64 characters
	maxLeaseConns  = 64
	versionSuffix  = "_version"
	tableNameChars = "ASCII letters, digits, _ and $"
)

// An Option configures [Open] and [New]. Options are values: they can be
// kept and passed to many stores.
type Option interface{ apply(*options) }

type options struct {
	table      string
	leaseConns int
}

func buildOptions(opts []Option) (options, error) {
	o := options{table: DefaultTable, leaseConns: DefaultLeaseConns}
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
			return fmt.Errorf("mysqllease: table name %q has the character %q; use %s", name, r, tableNameChars)
		}
	}
	return nil
}

type tableOption string

func (o tableOption) apply(opts *options) { opts.table = string(o) }

// WithTable names the lease table (default [DefaultTable]) in the DSN's
// database; its schema version lives in the table name + "_version". The
// name is 1–56 ASCII letters, digits, _ or $. Stores that must not see each
// other's leases, such as tests sharing one database, use different tables.
func WithTable(table string) Option { return tableOption(table) }

type leaseConnsOption int

func (o leaseConnsOption) apply(opts *options) { opts.leaseConns = int(o) }

// WithLeaseConns sets how many connections carry lease traffic (default
// [DefaultLeaseConns]; 1 to 64): the size of the pool [Open] keeps for
// leases, or how many connections [New] reserves from the caller's pool.
// A lease operation waiting for a row lock (a renewal behind a fenced
// write) holds one of them.
func WithLeaseConns(n int) Option { return leaseConnsOption(n) }
