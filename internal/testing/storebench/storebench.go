// Package storebench holds the benchmarks that run alike on every store:
// the failover of a lease between two Store instances on the real clock
// (Failover), which bench, etcdlease and mysqllease run, and the client
// CPU of 1,000 leases (ClientCPU), which bench, etcdlease and mysqllease
// run.
package storebench

import (
	"context"
	"errors"

	"github.com/leaderaware/leaderaware/elector"
)

// WatchStore is a Store under benchmark. The electors watch its leases
// through its BulkReader and Notifier, when it has them, as applications do.
type WatchStore interface {
	elector.Store
}

// withWatch returns wrapper, a Store that wraps inner, with inner's reads
// and notifications (see elector.BulkReader and elector.Notifier), which
// embedding hides: without them the elector's watch reads one lease at a
// time and learns of changes at its next poll only.
func withWatch(wrapper, inner elector.Store) watching {
	return watching{wrapper, inner}
}

// watching is a Store with the reads and notifications of inner.
type watching struct {
	elector.Store
	inner elector.Store
}

// GetMany passes the call to inner, or reads one lease at a time if inner
// is no elector.BulkReader.
func (w watching) GetMany(ctx context.Context, names []string) ([]elector.Lease, error) {
	if b, ok := w.inner.(elector.BulkReader); ok {
		return b.GetMany(ctx, names)
	}
	out := make([]elector.Lease, len(names))
	for i, name := range names {
		l, err := w.inner.Get(ctx, name)
		switch {
		case err == nil:
			out[i] = l
		case errors.Is(err, elector.ErrNoLease):
			out[i] = elector.Lease{Name: name}
		default:
			return nil, err
		}
	}
	return out, nil
}

// Notify passes the call to inner, or never calls changed if inner is no
// elector.Notifier.
func (w watching) Notify(changed func(elector.Change)) (stop func()) {
	if n, ok := w.inner.(elector.Notifier); ok {
		return n.Notify(changed)
	}
	return func() {}
}
