package elector

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Elector campaigns for leadership. [LeaseElector] is the implementation;
// the interface lets callers substitute their own.
type Elector interface {
	// Campaign blocks until the caller leads, or ctx ends (then it returns
	// ctx's error). A store failure other than ErrHeld is returned too, so the
	// caller can report it and campaign again. A term won just as ctx ended
	// is still returned: the caller must resign it.
	Campaign(ctx context.Context) (Term, error)
}

// Term is one period of leadership. Its methods are safe for concurrent use.
// A term renews its lease until it ends: a caller that no longer needs it
// must Resign it, even after Done is closed, or the lease stays held.
type Term interface {
	// Token is the fencing token: every later term of the same name has a
	// larger one.
	Token() uint64
	// Done is closed when the term ends.
	Done() <-chan struct{}
	// Err is nil until Done is closed; then it is ErrResigned, ErrLeaseLost,
	// ErrLeaseExpired or a store error (match with errors.Is).
	Err() error
	// Resign ends the term and frees the lease at once. It is safe to call
	// twice; a call after a successful one returns nil.
	Resign(ctx context.Context) error
}

// LeaseElector is an [Elector] for one lease name in one [Store]. Each
// LeaseElector is one candidate (one holder name). It holds no goroutine of
// its own: Campaign runs on the caller's goroutine, and each [Term] runs one
// goroutine that renews its lease until the term ends. A LeaseElector is safe
// for concurrent use, but a candidate normally campaigns once at a time.
type LeaseElector struct {
	store Store
	name  string
	cfg   Config
}

// New returns an elector for the lease name in s. It validates name (1–255
// bytes of printable UTF-8) and cfg (see [Config]); errors name the bad value.
func New(s Store, name string, cfg Config) (*LeaseElector, error) {
	if s == nil {
		return nil, errors.New("elector: nil Store")
	}
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &LeaseElector{store: s, name: name, cfg: cfg}, nil
}

// Name returns the lease name.
func (e *LeaseElector) Name() string { return e.name }

// Config returns the configuration in force, with defaults filled in.
func (e *LeaseElector) Config() Config { return e.cfg }

// Campaign implements [Elector]. It tries to acquire the lease, and while a
// live holder has it, tries again after a jittered RetryInterval, or as soon
// as the store reports a release (see [ReleaseWatcher]).
func (e *LeaseElector) Campaign(ctx context.Context) (Term, error) {
	var released <-chan struct{}
	if w, ok := e.store.(ReleaseWatcher); ok {
		ch, stop := w.WatchRelease(e.name)
		defer stop()
		released = ch
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		start := time.Now() // the trust window counts from before the store's clock read
		l, err := e.store.TryAcquire(ctx, e.name, e.cfg.Holder, e.cfg.TTL)
		switch {
		case err == nil && time.Now().Before(trustedUntil(start, e.cfg.TTL)):
			return startTerm(e, l, start), nil
		case err == nil:
			// The acquire took so long that its trust window has closed: the
			// lease may expire before anyone could use it. Give it back and
			// try again later.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.TTL)
			_ = e.store.Release(rctx, l) // if it fails, the lease expires on its own
			cancel()
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case !errors.Is(err, ErrHeld):
			return nil, fmt.Errorf("elector: campaign for lease %q: %w", e.name, err)
		}
		wait := jitter(e.cfg.RetryInterval)
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
		case <-released:
		}
	}
}

// Leader returns the live lease of this elector's name, whoever holds it, or
// an error matching [ErrNoLease].
func (e *LeaseElector) Leader(ctx context.Context) (Lease, error) {
	return e.store.Get(ctx, e.name)
}

// jitter returns a duration in [d/2, d].
func jitter(d time.Duration) time.Duration {
	half := d / 2
	return half + rand.N(d-half+1)
}
