// Package notifytest records what an [elector.Notifier] pushes, for the
// stores' tests of their wake-up sources.
package notifytest

import (
	"sync"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// Recorder keeps the changes passed to its Changed, the callback to give
// Notify.
type Recorder struct {
	mu      sync.Mutex
	changes []elector.Change
	next    int // the first change Expect has not looked at
	wake    chan struct{}
}

// New returns an empty Recorder.
func New() *Recorder { return &Recorder{wake: make(chan struct{}, 1)} }

// Changed records c; it never blocks.
func (r *Recorder) Changed(c elector.Change) {
	r.mu.Lock()
	r.changes = append(r.changes, c)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Len returns how many changes were recorded.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.changes)
}

// Expect waits up to d for a change, after those it already looked at, for
// which match holds, and returns it; what names the step in the failure.
func (r *Recorder) Expect(t testing.TB, d time.Duration, what string, match func(elector.Change) bool) elector.Change {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		for r.next < len(r.changes) {
			c := r.changes[r.next]
			r.next++
			if match(c) {
				r.mu.Unlock()
				return c
			}
		}
		r.mu.Unlock()
		select {
		case <-r.wake:
		case <-deadline.C:
			t.Fatalf("%s: no such change within %v", what, d)
		}
	}
}

// ExpectState waits up to d for the Known state of want's lease: the same
// Name, Token and Version (want with only Name set for free).
func (r *Recorder) ExpectState(t testing.TB, d time.Duration, want elector.Lease, what string) elector.Change {
	t.Helper()
	return r.Expect(t, d, what, func(c elector.Change) bool {
		return c.Known && c.Name == want.Name && c.State.Name == want.Name && c.State.Token == want.Token && c.State.Version == want.Version
	})
}

// ReadAll reports whether c asks for a read of every lease.
func ReadAll(c elector.Change) bool { return c.Name == "" && !c.Known }
