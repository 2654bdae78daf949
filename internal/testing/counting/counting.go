// Package counting counts the TryAcquire calls a lease store gets, for
// tests that check that waiting candidates make none of their own.
package counting

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// Watching is a store that follows the leases its candidates wait on.
type Watching interface {
	elector.Store
	elector.LeaseWatcher
}

// Store is S with its TryAcquire calls counted in Acquires. It keeps S's
// WatchLease, so an elector on it still watches through S.
type Store[S Watching] struct {
	S        S
	Acquires atomic.Int64
}

// TryAcquire counts the call and passes it to S.
func (c *Store[S]) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	c.Acquires.Add(1)
	return c.S.TryAcquire(ctx, name, holder, ttl, observed)
}

// Renew passes the call to S.
func (c *Store[S]) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	return c.S.Renew(ctx, l, ttl)
}

// Release passes the call to S.
func (c *Store[S]) Release(ctx context.Context, l elector.Lease) error { return c.S.Release(ctx, l) }

// Get passes the call to S.
func (c *Store[S]) Get(ctx context.Context, name string) (elector.Lease, error) {
	return c.S.Get(ctx, name)
}

// WatchLease passes the call to S.
func (c *Store[S]) WatchLease(name string, every time.Duration) (<-chan elector.Lease, func()) {
	return c.S.WatchLease(name, every)
}

var _ Watching = (*Store[*elector.MemoryStore])(nil)
