// Package placement spreads the leases of a group of replicas over its
// members, and drains a replica on purpose.
//
// A [Group] is the replicas that run the same leases in one store (one
// app's jobs). Each member keeps a seat, a lease of its own that the
// shared renewal schedule renews with its job terms, and reads every seat
// and every lease of the group in one call per RetryInterval; from that
// read it knows the live members, since when, and how many leases each
// holds. The electors a Group makes ([Group.Elector]) ask it, as their
// [elector.Placer], how long to wait before each attempt to take a lease,
// and their terms yield when it wants a surplus lease on another member.
//
// Placement changes only when a replica campaigns and when it gives a
// lease up, never how a lease is taken: every acquire is still the store's
// compare-and-set, so a placement bug costs handoffs, never safety. A
// candidate waits at most its lease's TTL, so a free lease is always taken,
// whatever the group believes of its members.
//
// Drain, Handoff and Resume move leadership: wire them behind the app's
// own authentication (a signal, a Unix socket created 0600), never on an
// unauthenticated status or metrics port.
//
// How it works: with L leases and N live members the target is
// T = ceil(L/N). Before each attempt a candidate waits a little for each
// lease its replica holds or is trying for, so the least-loaded member
// takes a free lease first, and more at or above T; a draining replica
// waits a TTL, and one that has just yielded a lease a RetryInterval for
// it. A member above T+1 yields its oldest surplus terms at once, a few
// per read; one above T yields its last surplus term to a member that has
// stayed below T for (1+T) RetryIntervals while others were above it (a
// replica that joins during a rolling deploy usually gets the next drained
// replica's leases meanwhile, without a move of its own). The members above
// T share the deficit in an order they all compute alike, so they do not
// all yield for one short member. A member is live while its seat's Token
// and Version changed within the last TTL on this replica's clock, or it
// was first seen less than a TTL ago; no wall clock is compared. Seat
// changes a store pushes ([elector.Notifier]) count at once.
package placement
