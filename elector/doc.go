// Package elector elects one leader per lease name among many candidates.
//
// A candidate is a [LeaseElector]: it campaigns for a named lease in a
// [Store] and, once it holds the lease, returns a [Term]. The term renews the
// lease in the background and ends, closing [Term.Done], when it is resigned,
// when another holder took the lease ([ErrLeaseLost]), or when renewals failed
// for so long that the holder can no longer trust its lease ([ErrLeaseExpired]).
//
// Safety comes first. A holder believes it leads only until the monotonic
// start of its last successful acquire or renew plus the TTL minus a safety
// margin (TTL/10). Past that instant the term ends, before any other candidate
// could acquire the lease in the store. Every term carries a fencing token
// ([Term.Token]) that is larger than the token of every earlier term of the
// same name, so a resource can refuse the writes of a stale leader.
//
// Liveness is the caller's loop: losing a term never ends anything but that
// term; call [LeaseElector.Campaign] again. The decorator package does exactly
// that for background jobs.
//
// Stores: [NewMemoryStore] (one process, tests), sqlitelease (one host) and
// pglease (many hosts). Every store passes the conformance suite in
// elector/electortest. A store may implement [ReleaseWatcher] so that waiting
// candidates wake as soon as a lease is released; without it they poll every
// RetryInterval.
//
// The package imports only the standard library.
package elector
