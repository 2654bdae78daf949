package main

import (
	"sync"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// keptTransitions is how many transitions the status page shows.
const keptTransitions = 20

// transition is an election or demotion of one of this instance's jobs, as
// /leases gives it.
type transition struct {
	At    time.Time `json:"at"`
	Lease string    `json:"lease"`
	Event string    `json:"event"` // "elected" or "demoted"
	Token uint64    `json:"token"`
	Cause string    `json:"cause,omitempty"` // demoted: why, as elector.Cause names it
	Error string    `json:"error,omitempty"` // demoted: the error the term ended with, unless resigned
}

// transitions is an elector.Observer that keeps the last keptTransitions
// elections and demotions it observed.
type transitions struct {
	mu   sync.Mutex
	ring [keptTransitions]transition
	n    int // how many it observed in all
}

// Observe implements elector.Observer: it keeps elections and demotions,
// and ignores the other events.
func (t *transitions) Observe(e elector.Event) {
	if e.Kind != elector.EventElected && e.Kind != elector.EventDemoted {
		return
	}
	tr := transition{At: time.Now(), Lease: e.Lease, Event: e.Kind.String(), Token: e.Token}
	if e.Kind == elector.EventDemoted {
		tr.Cause = e.Cause.String()
		if e.Err != nil && e.Cause != elector.CauseResigned {
			tr.Error = e.Err.Error()
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ring[t.n%len(t.ring)] = tr
	t.n++
}

// last returns the transitions it keeps, newest first.
func (t *transitions) last() []transition {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]transition, 0, min(t.n, len(t.ring)))
	for i := t.n - 1; i >= 0 && i >= t.n-len(t.ring); i-- {
		out = append(out, t.ring[i%len(t.ring)])
	}
	return out
}

// observers is an elector.Observer that passes every event to each of its
// elements, in order.
type observers []elector.Observer

// Observe implements elector.Observer.
func (os observers) Observe(e elector.Event) {
	for _, o := range os {
		o.Observe(e)
	}
}
