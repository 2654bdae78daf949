// Package counting counts the TryAcquire calls a lease store gets, for
// tests that check that waiting candidates make none of their own.
package counting

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// Watching is a store that reads many leases at once, as the elector's watch
// of the leases its candidates wait on uses it.
type Watching interface {
	elector.Store
	elector.BulkReader
}

// Store is S with its TryAcquire calls counted in Acquires and its
// GetMany calls in Reads. It keeps S's GetMany, Notify and RenewMany (when
// S has them), so an elector on it still watches and renews through S.
type Store[S Watching] struct {
	S        S
	Acquires atomic.Int64
	Reads    atomic.Int64
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

// GetMany counts the call and passes it to S.
func (c *Store[S]) GetMany(ctx context.Context, names []string) ([]elector.Lease, error) {
	c.Reads.Add(1)
	return c.S.GetMany(ctx, names)
}

// Notify passes the call to S if S is an [elector.Notifier]; otherwise it
// never calls changed.
func (c *Store[S]) Notify(changed func(elector.Change)) (stop func()) {
	if n, ok := any(c.S).(elector.Notifier); ok {
		return n.Notify(changed)
	}
	return func() {}
}

// RenewMany passes the call to S if S is an [elector.BatchRenewer], and
// otherwise renews each term with its own Renew.
func (c *Store[S]) RenewMany(ctx context.Context, terms []elector.Lease) ([]elector.Lease, error) {
	if b, ok := any(c.S).(elector.BatchRenewer); ok {
		return b.RenewMany(ctx, terms)
	}
	out := make([]elector.Lease, len(terms))
	for i, l := range terms {
		r, err := c.S.Renew(ctx, l, l.TTL)
		switch {
		case err == nil:
			out[i] = r
		case !errors.Is(err, elector.ErrLeaseLost):
			return nil, err
		}
	}
	return out, nil
}

var (
	_ Watching             = (*Store[*elector.MemoryStore])(nil)
	_ elector.Notifier     = (*Store[*elector.MemoryStore])(nil)
	_ elector.BatchRenewer = (*Store[*elector.MemoryStore])(nil)
)
