package elector

import "time"

// Placer spreads the leases of a group of replicas over its members; package
// placement implements it. It changes only when a candidate tries to take a
// lease and when a holder gives one up, never how a lease is taken: every
// acquire is still the Store's compare-and-set, so a Placer can cost
// handoffs but never make two leaders, and since the elector holds a
// candidate back for at most its TTL, a free lease is always taken. Set one
// in [Config.Placer].
type Placer interface {
	// Hold returns how long the candidate for the lease name should wait
	// before each attempt to take it (a free lease, or one it has watched to
	// the end of its watch); 0 tries at once. The elector waits at most the
	// candidate's TTL. Hold must return quickly.
	Hold(name string) time.Duration
	// Lead is told of each term this process wins for name, before Campaign
	// returns it, and returns the term's [Yielder] channel: closed when the
	// placer wants the holder to give the lease to another candidate, or
	// nil for never.
	Lead(name string, t Term) (yield <-chan struct{})
}

// Yielder is implemented by the terms of a [LeaseElector]. Yield returns a
// channel that is closed when the elector's [Placer] asks the holder to
// give the lease to another candidate (to balance a group, or to drain this
// replica): the holder should stop its work and then Resign. The term stays
// held, and renewed, until it does. It is nil when nothing will ask.
type Yielder interface {
	Yield() <-chan struct{}
}
