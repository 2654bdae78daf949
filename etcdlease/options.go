package etcdlease

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"
)

// Defaults of the options.
const (
	// DefaultPrefix is the key prefix of the leases unless [WithPrefix]
	// says otherwise: the lease "price-refresh" is the key
	// "leaderaware/leases/price-refresh".
	DefaultPrefix = "leaderaware/leases/"
	// DefaultDialTimeout bounds how long [Open] waits for etcd to answer,
	// unless its ctx ends first or [WithDialTimeout] says otherwise.
	DefaultDialTimeout = 5 * time.Second
	// DefaultOpTimeout bounds every store operation whose ctx has no
	// deadline, unless [WithOpTimeout] says otherwise.
	DefaultOpTimeout = 5 * time.Second
)

// An Option configures [Open] and [New]. Options are values: they can be
// kept, compared by their String and passed to many stores.
type Option interface {
	apply(*options)
	// String describes the option the way it is written in Go.
	String() string
}

type options struct {
	prefix      string
	dialTimeout time.Duration
	opTimeout   time.Duration
	tls         *tls.Config
	logger      *slog.Logger
	openOnly    []string // options that only Open can apply
}

func buildOptions(opts []Option) (options, error) {
	o := options{prefix: DefaultPrefix, dialTimeout: DefaultDialTimeout, opTimeout: DefaultOpTimeout}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if err := validPrefix(o.prefix); err != nil {
		return o, err
	}
	if o.dialTimeout <= 0 {
		return o, fmt.Errorf("etcdlease: dial timeout %v must be positive", o.dialTimeout)
	}
	if o.opTimeout <= 0 {
		return o, fmt.Errorf("etcdlease: operation timeout %v must be positive", o.opTimeout)
	}
	return o, nil
}

func validPrefix(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("etcdlease: key prefix is empty; it must end in '/', like %q", DefaultPrefix)
	case !strings.HasSuffix(p, "/"):
		return fmt.Errorf("etcdlease: key prefix %q must end in '/' (as %q does), so that the store's watch "+
			"sees no keys of another prefix that starts the same way", p, p+"/")
	}
	for i, r := range p {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("etcdlease: key prefix %q has a non-printable character %U at byte %d", p, r, i)
		}
	}
	return nil
}

type prefixOption string

func (o prefixOption) apply(opts *options) { opts.prefix = string(o) }
func (o prefixOption) String() string      { return fmt.Sprintf("etcdlease.WithPrefix(%q)", string(o)) }

// WithPrefix puts the leases under prefix (default [DefaultPrefix]): the
// lease name is appended to it to make the key. It must end in '/'. Stores
// that must not see each other's leases, such as tests sharing one etcd,
// use prefixes of their own, neither of which is a prefix of the other.
func WithPrefix(prefix string) Option { return prefixOption(prefix) }

type dialTimeoutOption time.Duration

func (o dialTimeoutOption) apply(opts *options) {
	opts.dialTimeout = time.Duration(o)
	opts.openOnly = append(opts.openOnly, o.String())
}
func (o dialTimeoutOption) String() string {
	return fmt.Sprintf("etcdlease.WithDialTimeout(%v)", time.Duration(o))
}

// WithDialTimeout bounds how long [Open] waits for etcd to answer (default
// [DefaultDialTimeout]); Open fails when it runs out or its ctx ends,
// whichever is first. It is the client's DialTimeout too, which bounds its
// reconnections. Open only.
func WithDialTimeout(d time.Duration) Option { return dialTimeoutOption(d) }

type opTimeoutOption time.Duration

func (o opTimeoutOption) apply(opts *options) { opts.opTimeout = time.Duration(o) }
func (o opTimeoutOption) String() string {
	return fmt.Sprintf("etcdlease.WithOpTimeout(%v)", time.Duration(o))
}

// WithOpTimeout bounds every store operation whose ctx has no deadline
// (default [DefaultOpTimeout]). A ctx with a deadline keeps it, even a
// longer one: the elector gives every call its own.
func WithOpTimeout(d time.Duration) Option { return opTimeoutOption(d) }

type tlsOption struct{ c *tls.Config }

func (o tlsOption) apply(opts *options) {
	opts.tls = o.c
	opts.openOnly = append(opts.openOnly, o.String())
}
func (o tlsOption) String() string { return "etcdlease.WithTLS(...)" }

// WithTLS makes [Open] connect with TLS, using c (client certificates,
// root CAs). For anything else the client needs (authentication, keepalive
// settings, a logger), make the client yourself and use [New]. Open only.
func WithTLS(c *tls.Config) Option { return tlsOption{c} }

type loggerOption struct{ l *slog.Logger }

func (o loggerOption) apply(opts *options) { opts.logger = o.l }
func (o loggerOption) String() string      { return "etcdlease.WithLogger(...)" }

// WithLogger sets where the store reports what it cannot return as an
// error: its lease watch failing and being started again. Default:
// nowhere.
func WithLogger(l *slog.Logger) Option { return loggerOption{l} }
