package decorator

import (
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"strings"
	"time"
)

// Defaults of the options.
const (
	DefaultStartTimeout = 15 * time.Second // see [WithStartTimeout]
	DefaultStopTimeout  = 15 * time.Second // see [WithStopTimeout]
	DefaultBackoffMin   = 1 * time.Second  // see [WithBackoff]
	DefaultBackoffMax   = 30 * time.Second // see [WithBackoff]
)

// Option configures [Decorate]. Options are values: one Option may be passed
// to many Decorate calls. String describes the option, e.g.
// "WithStartTimeout(15s)".
type Option interface {
	apply(*config)
	String() string
}

// config is what the options set; Decorate turns it into an immutable job.
type config struct {
	hooks        []Hooks
	mws          []Middleware
	logger       *slog.Logger
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

func (c *config) fail(o Option, format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("decorator: %s: "+format, append([]any{o}, args...)...))
}

// WithHooks adds h to the hooks of the decorated job. Several WithHooks
// compose: each hook runs in the order the options were given. Nil fields
// are skipped.
func WithHooks(h Hooks) Option { return hooksOption(h) }

type hooksOption Hooks

func (o hooksOption) apply(c *config) { c.hooks = append(c.hooks, Hooks(o)) }

func (o hooksOption) String() string {
	var set []string
	if o.OnElected != nil {
		set = append(set, "OnElected")
	}
	if o.OnDemoted != nil {
		set = append(set, "OnDemoted")
	}
	if o.OnError != nil {
		set = append(set, "OnError")
	}
	return "WithHooks(" + strings.Join(set, ", ") + ")"
}

// WithMiddleware wraps the inner job in mws, inside the leader gate: the
// middleware see only the Start and Stop calls of terms this replica leads.
// The first middleware is the outermost. Several WithMiddleware append in
// order. Nil middleware are skipped.
func WithMiddleware(mws ...Middleware) Option {
	return middlewareOption(append([]Middleware(nil), mws...))
}

type middlewareOption []Middleware

func (o middlewareOption) apply(c *config) { c.mws = append(c.mws, o...) }

func (o middlewareOption) String() string {
	names := make([]string, len(o))
	for i, m := range o {
		names[i] = funcName(m)
	}
	return "WithMiddleware(" + strings.Join(names, ", ") + ")"
}

// WithLogger sets the logger of the decorated job: it logs elections and
// demotions at Debug, and errors at Error when no OnError hook is set. The
// default is [slog.Default] at the time of Decorate. A nil logger is a bad
// value: Start returns an error.
func WithLogger(l *slog.Logger) Option { return loggerOption{l} }

type loggerOption struct{ l *slog.Logger }

func (o loggerOption) apply(c *config) {
	if o.l == nil {
		c.fail(o, "the logger is nil")
		return
	}
	c.logger = o.l
}

func (o loggerOption) String() string {
	if o.l == nil {
		return "WithLogger(nil)"
	}
	return fmt.Sprintf("WithLogger(%T)", o.l.Handler())
}

// WithStartTimeout bounds OnElected and the inner job's Start together,
// counted from the moment a term is won; the inner Start's context ends then.
// If they have not returned by then, the term ends and the overrun is
// reported (OnError): the term is resigned if the inner Start has not been
// called yet, and abandoned, its lease left to run out in the store, if the
// inner Start runs. It must be positive. Default 15s.
func WithStartTimeout(d time.Duration) Option { return startTimeoutOption(d) }

type startTimeoutOption time.Duration

func (o startTimeoutOption) apply(c *config) {
	if o <= 0 {
		c.fail(o, "the start timeout %v must be positive", time.Duration(o))
		return
	}
	c.startTimeout = time.Duration(o)
}

func (o startTimeoutOption) String() string {
	return fmt.Sprintf("WithStartTimeout(%v)", time.Duration(o))
}

// WithStopTimeout bounds how long the inner job may take to stop while its
// term is held, counted from the call of Stop, or from the end of a term that
// ended on its own: it bounds the inner Stop's context and its one retry,
// and if the inner Stop has not returned nil by then, the term is abandoned
// and its lease left to run out in the store. It also bounds each
// resignation, and how long Stop, and a Start waiting for a previous
// campaign, wait before returning an error. It must be positive. Default
// 15s.
func WithStopTimeout(d time.Duration) Option { return stopTimeoutOption(d) }

type stopTimeoutOption time.Duration

func (o stopTimeoutOption) apply(c *config) {
	if o <= 0 {
		c.fail(o, "the stop timeout %v must be positive", time.Duration(o))
		return
	}
	c.stopTimeout = time.Duration(o)
}

func (o stopTimeoutOption) String() string {
	return fmt.Sprintf("WithStopTimeout(%v)", time.Duration(o))
}

// WithBackoff sets how long the decorated job waits before campaigning again
// after the inner job's Start failed or the elector returned an error. The
// wait doubles after each failure in a row, from min up to max, with jitter;
// every wait lies in [min, max]. It resets after a term whose Start
// succeeded. min must be positive and not above max. Default 1s to 30s.
func WithBackoff(min, max time.Duration) Option { return backoffOption{min, max} }

type backoffOption struct{ min, max time.Duration }

func (o backoffOption) apply(c *config) {
	switch {
	case o.min <= 0:
		c.fail(o, "the minimum backoff %v must be positive", o.min)
	case o.max < o.min:
		c.fail(o, "the maximum backoff %v is below the minimum %v", o.max, o.min)
	default:
		c.backoffMin, c.backoffMax = o.min, o.max
	}
}

func (o backoffOption) String() string {
	return fmt.Sprintf("WithBackoff(%v, %v)", o.min, o.max)
}

// funcName returns the short name of f's function, e.g.
// "decorator.Recover.func1", or "nil".
func funcName(f any) string {
	v := reflect.ValueOf(f)
	if !v.IsValid() || v.IsNil() {
		return "nil"
	}
	fn := runtime.FuncForPC(v.Pointer())
	if fn == nil {
		return "?"
	}
	name := fn.Name()
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	return name
}
