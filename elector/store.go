package elector

import (
	"context"
	"time"
)

// Lease is one term of a named lease as a [Store] records it.
type Lease struct {
	Name   string // the lease name, 1–255 bytes of printable UTF-8
	Holder string // the candidate that holds it
	// Token is the fencing token of this term. Every later term of the same
	// name has a larger token; renewals keep it.
	Token uint64
	// ExpiresAt is when the lease expires, by the store's clock. A holder must
	// not compare it with its own clock; the elector trusts its own monotonic
	// clock instead (see the package documentation).
	ExpiresAt time.Time
}

// Store keeps leases. Every operation is atomic; implementations must pass
// electortest.TestStore. A Store is safe for concurrent use.
type Store interface {
	// TryAcquire starts a new term for holder if the lease is free or
	// expired, with a token larger than any earlier one of this name. If a
	// live holder has it, even holder itself, it returns a *HeldError
	// (errors.Is(err, ErrHeld)) naming that holder.
	TryAcquire(ctx context.Context, name, holder string, ttl time.Duration) (Lease, error)
	// Renew extends l by ttl from now if l is still the current, unexpired
	// term; otherwise it returns ErrLeaseLost, even if nobody else took it.
	Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)
	// Release frees the lease at once if l is still the current term, and
	// returns nil otherwise. It never lowers the token.
	Release(ctx context.Context, l Lease) error
	// Get returns the live lease of name, or ErrNoLease.
	Get(ctx context.Context, name string) (Lease, error)
}

// ReleaseWatcher is an optional interface of a [Store]: it tells waiting
// candidates that a lease may have become free, so they need not wait for
// their next poll. The elector stays correct without it; it polls every
// RetryInterval whether or not a store implements it. A wrapper that embeds
// [Store] hides this interface; to keep fast handoff, pass it through:
//
//	type counting struct {
//		elector.Store
//		elector.ReleaseWatcher // the same store
//	}
type ReleaseWatcher interface {
	// WatchRelease returns a channel that receives a value soon after the
	// named lease is released (spurious values are allowed), and a stop
	// function that the caller must call once it no longer watches. The
	// channel is never closed; sends never block the store.
	WatchRelease(name string) (released <-chan struct{}, stop func())
}
