package k8slease

import (
	"fmt"
	"log/slog"
	"time"
)

// DefaultOpTimeout bounds every store operation whose ctx has no deadline,
// unless [WithOpTimeout] says otherwise.
const DefaultOpTimeout = 5 * time.Second

// An Option configures [New]. Options are values: they can be kept,
// compared by their String and passed to many stores.
type Option interface {
	apply(*options)
	// String describes the option the way it is written in Go.
	String() string
}

type options struct {
	opTimeout time.Duration
	logger    *slog.Logger
}

func buildOptions(opts []Option) (options, error) {
	o := options{opTimeout: DefaultOpTimeout}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if o.opTimeout <= 0 {
		return o, fmt.Errorf("k8slease: operation timeout %v must be positive", o.opTimeout)
	}
	return o, nil
}

type opTimeoutOption time.Duration

func (o opTimeoutOption) apply(opts *options) { opts.opTimeout = time.Duration(o) }
func (o opTimeoutOption) String() string {
	return fmt.Sprintf("k8slease.WithOpTimeout(%v)", time.Duration(o))
}

// WithOpTimeout bounds every store operation whose ctx has no deadline, and
// each read of the namespace by the lease watch (default
// [DefaultOpTimeout]). A ctx with a deadline keeps it: the elector gives
// every call its own.
func WithOpTimeout(d time.Duration) Option { return opTimeoutOption(d) }

type loggerOption struct{ l *slog.Logger }

func (o loggerOption) apply(opts *options) { opts.logger = o.l }
func (o loggerOption) String() string      { return "k8slease.WithLogger(...)" }

// WithLogger sets where the store reports what it cannot return as an
// error: its lease watch failing and being started again. Default:
// nowhere.
func WithLogger(l *slog.Logger) Option { return loggerOption{l} }
