package elector

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers branch on them with [errors.Is].
var (
	// ErrHeld is returned by [Store.TryAcquire] when a live holder has the
	// lease. The returned error is a *[HeldError] that names the holder.
	ErrHeld = errors.New("lease is held")
	// ErrNoLease is returned by [Store.Get] when the lease has no live holder.
	ErrNoLease = errors.New("lease has no live holder")
	// ErrLeaseLost is returned by [Store.Renew] when the lease is no longer the
	// caller's current term (expired, released or taken), and is the error of
	// a term that ended that way.
	ErrLeaseLost = errors.New("lease lost")
	// ErrLeaseExpired is the error of a term whose renewals failed until the
	// holder could no longer trust its lease.
	ErrLeaseExpired = errors.New("lease expired before it could be renewed")
	// ErrResigned is the error of a term that ended by [Term.Resign].
	ErrResigned = errors.New("term resigned")
	// ErrNoTerm is returned by fenced writes given a context that carries no
	// term (see [ContextWithTerm] and [LeaseFromContext]).
	ErrNoTerm = errors.New("context carries no leader term")
)

// HeldError is the error a [Store] returns from TryAcquire when another live
// holder (or the caller itself, still live) has the lease. It matches
// [ErrHeld] with [errors.Is].
type HeldError struct {
	Lease Lease // the live lease as the store saw it
}

// Error names the lease, its holder and its token.
func (e *HeldError) Error() string {
	return fmt.Sprintf("lease %q is held by %q (token %d)", e.Lease.Name, e.Lease.Holder, e.Lease.Token)
}

// Is reports whether target is [ErrHeld].
func (e *HeldError) Is(target error) bool { return target == ErrHeld }
