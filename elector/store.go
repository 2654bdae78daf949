package elector

import (
	"context"
	"time"
)

// Lease is the state of a named lease as a [Store] records it.
type Lease struct {
	Name   string // the lease name, 1–255 bytes of printable UTF-8
	Holder string // the candidate that holds it
	// Token is the fencing token of this term. Every later term of the same
	// name has a larger token, even after the store lost its rows; renewals
	// keep it.
	Token uint64
	// Version grows with every write to the lease (acquire, renew,
	// release) and never repeats, even after the row was rolled back. A
	// candidate that has seen one Version unchanged for TTL may take the
	// lease over.
	Version uint64
	// TTL is the holder's TTL, as it last acquired or renewed.
	TTL time.Duration
	// Written is the time of the last write by the writer's wall clock. It
	// is for display only: no candidate or holder ever compares it with a
	// clock.
	Written time.Time
}

// Is reports whether l and o are the same state of a lease: the same
// nonzero Token and Version. It is the comparison of [Store.TryAcquire].
func (l Lease) Is(o Lease) bool {
	return l.Token != 0 && l.Token == o.Token && l.Version == o.Version
}

// Expires returns Written + TTL, the expiry to display. The lease may end
// earlier (released) or later (a candidate takes over only after watching
// it for TTL on its own clock).
func (l Lease) Expires() time.Time { return l.Written.Add(l.TTL) }

// Store keeps leases. Stores never compare timestamps: a candidate decides
// when a holder's lease has run out, by its own clock (see the package
// documentation). Every operation is atomic; implementations must pass
// electortest.TestStore. A Store is safe for concurrent use.
type Store interface {
	// TryAcquire is a compare-and-set that starts a new term for holder,
	// with a token larger than any earlier one of this name. It succeeds if
	// the lease is free (never acquired, or released), or if it still is
	// exactly observed (same Token and Version): the lease the candidate
	// watched for its whole TTL. Pass the zero Lease when the candidate has
	// watched nothing. Otherwise it returns a *HeldError
	// (errors.Is(err, ErrHeld)) carrying the current lease, so the
	// candidate can watch it.
	TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed Lease) (Lease, error)
	// Renew is a compare-and-set on l's Token and Holder: if l is still the
	// current, unreleased term, it records ttl, bumps the Version and
	// returns the new state; otherwise it returns ErrLeaseLost.
	Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)
	// Release marks the lease released if l is still the current term,
	// bumping the Version and keeping the Token, and returns nil otherwise.
	Release(ctx context.Context, l Lease) error
	// Get returns the current lease of name, or ErrNoLease if it is free.
	// A held lease whose holder died is still returned: only a candidate's
	// watch decides that it ran out.
	Get(ctx context.Context, name string) (Lease, error)
}

// The optional interfaces below let the elector do the protocol work for
// every lease a process runs in one Store instance, whichever LeaseElector
// the lease came from: one watch follows every lease the candidates wait
// on, and one schedule renews every held term. A wrapper that embeds
// [Store] hides them; to keep their benefit, pass them through:
//
//	type counting struct {
//		elector.Store
//		elector.BulkReader // the same store
//	}

// BulkReader is an optional interface of a [Store] that reads many leases in
// one call. The elector's watch reads every lease its candidates wait on
// with one call per RetryInterval (and when the store's [Notifier] asks);
// without it, the watch calls Get once per lease.
type BulkReader interface {
	// GetMany returns the current state of each of names, in order: the
	// lease, or the zero Lease with only Name set when it is free (a store
	// may report a lease whose holder it knows to be gone as free, if its
	// TryAcquire then takes it over at once).
	GetMany(ctx context.Context, names []string) ([]Lease, error)
}

// Notifier is an optional interface of a [Store] that pushes changes to the
// elector's watch as the store learns of them (a database notification, a
// watch event, a file change), so that a waiting candidate learns of a
// release or a new term at once instead of at the watch's next read.
type Notifier interface {
	// Notify calls changed for each change the store learns of until stop
	// is called, and never after stop returns. changed never blocks; it may
	// be called from any goroutine.
	Notify(changed func(Change)) (stop func())
}

// CompleteNotifier is an optional interface of a [Notifier] that pushes
// every write: the new state of each lease written (a [Change] with Known
// set), by this Store or any other on the same leases, from the moment
// Notify returns. When it may have missed one (a reconnect, an overflow) it
// pushes a Change with Name "" and Known false, and every write after that
// one again. The elector's watch then counts a Sync as a read of every
// lease, and reads them only every RetryInterval; it falls back to reading
// every TTL/20 whenever a Sync fails.
type CompleteNotifier interface {
	Notifier
	// Sync returns nil once every write done before the call has been
	// pushed to each Notify callback, or a Change with Name "" has been
	// pushed during the call; an error if it cannot tell.
	Sync(ctx context.Context) error
}

// Change is what a [Notifier] tells the elector's watch: the new state of a
// lease, when the store knows it, or that leases should be read again.
type Change struct {
	// Name is the lease that changed, or "" when any lease may have.
	Name string
	// State is its new state (the zero Lease but for Name when it is free)
	// when Known; otherwise the watch reads the lease again.
	State Lease
	Known bool
}

// BatchRenewer is an optional interface of a [Store] that renews many terms
// in one call. The elector's schedule renews the terms due at about the same
// time together, in one call; without it, with one Renew each.
type BatchRenewer interface {
	// RenewMany renews each of terms for its own TTL (Lease.TTL), as Renew
	// would, in one call, and returns the new states in order, with the
	// zero Lease for a term that is no longer current (where Renew returns
	// ErrLeaseLost). An error leaves each term renewed or not, as a failed
	// Renew would; with it, a result of len(terms) may still report the
	// terms renewed (its nonzero entries), so that one slow term costs the
	// others nothing.
	RenewMany(ctx context.Context, terms []Lease) ([]Lease, error)
}
