package elector

import (
	"reflect"
	"sync"

	"github.com/leaderaware/leaderaware/internal/clock"
)

// storeRuntime is the protocol work for one Store instance in this process,
// shared by every LeaseElector created with that Store value: one renewal
// schedule for the terms held through it, with one resume watch (see
// scheduler), and one watch of the leases its candidates wait on (see hub).
//
// How it works: each piece runs a goroutine only while it has work (a
// renewal due, at most renewWorkers store calls, the resume watch while it
// has terms, the hub's loop while it has subscribers), so a Store runs a
// fixed number of goroutines however many leases it serves, and none once
// its terms have ended and its candidates returned. Each term (from its
// start to its Resign or Abandon) and each waiting Campaign is a user; the
// runtime is in use from the first to the last, who waits for its
// goroutines. It is per Store, not per process, so that the leases of one
// synctest bubble (each test has its own Store) are served by goroutines of
// that bubble: a bubble must not touch another's channels and timers. A
// LeaseElector keeps the runtime it last used, and takes it up again while
// its Store has none in use, so that a Start/Stop cycle builds nothing.
type storeRuntime struct {
	key   any
	store Store
	clock clock.Clock    // the Store's, which its electors read too
	users int            // guarded by runtimes.mu
	idle  bool           // no users and no goroutines: free to take up again; guarded by runtimes.mu
	wg    sync.WaitGroup // the runtime's goroutines
	sched scheduler
	hub   hub
}

var runtimes struct {
	mu sync.Mutex
	m  map[any]*storeRuntime // in use, by Store (or elector, for a Store that is no map key)
}

// join returns the runtime of e's Store (the one in use, else e's last if
// idle, else a new one) and counts one more user; the caller must call
// leave once.
func join(e *LeaseElector) *storeRuntime {
	key := e.key
	runtimes.mu.Lock()
	defer runtimes.mu.Unlock()
	rt := runtimes.m[key]
	if rt == nil {
		if rt = e.rt; rt == nil || !rt.idle {
			rt = &storeRuntime{key: key, store: e.store, clock: e.clock}
			rt.sched.init(rt)
			rt.hub.init(rt)
		}
		rt.idle = false
		if runtimes.m == nil {
			runtimes.m = map[any]*storeRuntime{}
		}
		runtimes.m[key] = rt
	}
	e.rt = rt
	rt.users++
	return rt
}

// runtimeKey is the key of e's Store's runtime: the Store, or e for a Store
// that is no map key.
func runtimeKey(e *LeaseElector) any {
	if reflect.ValueOf(e.store).Comparable() {
		return e.store
	}
	return e
}

// tell hands l, a state of its lease that e's store has just written, to
// the watch of e's Store's runtime, if it has one: its other candidates
// learn of it without waiting for a push or a poll, which a store without a
// [Notifier] would make them wait for.
func tell(e *LeaseElector, l Lease) {
	runtimes.mu.Lock()
	rt := runtimes.m[e.key]
	runtimes.mu.Unlock()
	if rt != nil {
		rt.tell(l)
	}
}

// tell is tell for a runtime the caller uses.
func (rt *storeRuntime) tell(l Lease) {
	rt.hub.changed(Change{Name: l.Name, State: l, Known: true})
}

// leave ends one use of rt. The last puts rt out of use and waits for its
// goroutines, which end once they have no work left.
func (rt *storeRuntime) leave() {
	runtimes.mu.Lock()
	rt.users--
	last := rt.users == 0
	if last {
		delete(runtimes.m, rt.key)
	}
	runtimes.mu.Unlock()
	if last {
		rt.wg.Wait()
		runtimes.mu.Lock()
		rt.idle = true
		runtimes.mu.Unlock()
	}
}

// kick wakes a loop that waits on ch without blocking.
func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
