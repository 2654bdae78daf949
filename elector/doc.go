// Package elector elects one leader per lease name among many candidates.
//
// A candidate is a [LeaseElector]: it campaigns for a named lease in a
// [Store] and, once it holds the lease, returns a [Term]. The term renews the
// lease in the background and ends, closing [Term.Done], when it is resigned,
// when another holder took the lease ([ErrLeaseLost]), or when renewals failed
// for so long that the holder can no longer trust its lease ([ErrLeaseExpired]).
//
// Safety comes first, and no clock is ever compared with another. A store
// keeps, per lease, a fencing token and a version that grows with every
// write and never repeats, even after the row was rolled back (a failover
// to a standby that lagged, a restore); it never decides that a lease has
// expired. A candidate does: it
// takes over a held lease only after it has seen the same version unchanged
// for the holder's whole TTL, measured on its own clock from the first
// moment it saw it, and then only by a compare-and-set on that version. The
// holder trusts its term until the start of its last successful acquire or
// renew plus the TTL minus a safety margin (TTL/10), on its own clock. The
// candidate's watch starts after the holder's renewal started, so the holder
// always stops first; only clock rates matter, and a step of any wall clock
// (an NTP step, a database failover to a host with another clock) cannot
// make two leaders. Both clocks keep counting while the machine is suspended
// (CLOCK_BOOTTIME on Linux), so a host resumed from suspend does not believe
// its old term. Every term carries a fencing token ([Term.Token]) that is
// larger than the token of every earlier term of the same name, so a
// resource can refuse the writes of a stale leader.
//
// The cost of this model: a candidate that starts fresh (it never saw the
// holder renew) waits one TTL before it takes over the lease of a holder
// that died. A released lease is taken at once.
//
// Liveness is the caller's loop: losing a term never ends anything but that
// term; call [LeaseElector.Campaign] again. The decorator package does exactly
// that for background jobs.
//
// Stores: [NewMemoryStore] (one process, tests), sqlitelease (one host),
// pglease (many hosts), and, in modules of their own, etcdlease and
// mysqllease. Every store passes the conformance suite in
// elector/electortest. The electors of one Store value in a process share
// one renewal schedule and one watch of the leases their candidates wait
// on: a store that implements [BatchRenewer] renews the terms due together
// in one call, one that implements [BulkReader] is read for every waiting
// candidate in one call per RetryInterval, and one that implements
// [Notifier] wakes them as soon as it learns of a change. Waiting
// candidates make no store calls of their own.
//
// The package imports only the standard library and, for the clock that
// counts suspend, golang.org/x/sys.
package elector
