package elector

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers branch on them with [errors.Is].
var (
	// ErrHeld is returned by [Store.TryAcquire] when the lease is held and
	// is not the lease the candidate observed. The returned error is a
	// *[HeldError] that carries the current lease.
	ErrHeld = errors.New("lease is held")
	// ErrNoLease is returned by [Store.Get] when the lease is free.
	ErrNoLease = errors.New("lease is free")
	// ErrLeaseLost is returned by [Store.Renew] when the lease is no longer the
	// caller's current term (released or taken over), and is the error of a
	// term that ended that way.
	ErrLeaseLost = errors.New("lease lost")
	// ErrLeaseExpired is the error of a term whose renewals failed until the
	// holder could no longer trust its lease.
	ErrLeaseExpired = errors.New("lease expired before it could be renewed")
	// ErrResigned is the error of a term that ended by [Term.Resign].
	ErrResigned = errors.New("term resigned")
	// ErrAbandoned is the error of a term that ended by [Term.Abandon].
	ErrAbandoned = errors.New("term abandoned: its lease runs out in the store")
	// ErrNoTerm is returned by fenced writes given a context that carries no
	// term (see [ContextWithTerm] and [LeaseFromContext]).
	ErrNoTerm = errors.New("context carries no leader term")
)

// HeldError is the error a [Store] returns from TryAcquire when the lease is
// held (by another candidate or by the caller itself) and is not the lease
// the caller observed. It matches [ErrHeld] with [errors.Is].
type HeldError struct {
	Lease Lease // the current lease, with its Version and TTL
}

// Error names the lease, its holder and its token.
func (e *HeldError) Error() string {
	return fmt.Sprintf("lease %q is held by %q (token %d)", e.Lease.Name, e.Lease.Holder, e.Lease.Token)
}

// Is reports whether target is [ErrHeld].
func (e *HeldError) Is(target error) bool { return target == ErrHeld }
