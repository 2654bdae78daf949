package sqlitelease_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// watching is a Store with a minimal stand-in for the core's watch hub,
// which the elector does not have yet: it gives the elector a
// LeaseWatcher built on GetMany and Notify, so that the tests of handoff
// and crash failover through an elector keep measuring the store's wake
// source. Delete it once the elector watches through GetMany and Notify.
type watching struct{ *sqlitelease.Store }

func (w watching) WatchLease(name string, every time.Duration) (<-chan elector.Lease, func()) {
	return watchLease(w.Store, name, every)
}

// watchLease follows the lease name: it reads it with GetMany at once, when
// Notify pushes its name or "", and every `every`, and sends each new state
// (the zero Lease when it is free) to the channel, which keeps the latest.
func watchLease(s *sqlitelease.Store, name string, every time.Duration) (<-chan elector.Lease, func()) {
	states := make(chan elector.Lease, 1)
	kick := make(chan struct{}, 1)
	stopNotify := s.Notify(func(c elector.Change) {
		if c.Name == "" || c.Name == name {
			select {
			case kick <- struct{}{}:
			default:
			}
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		var last elector.Lease
		sent := false
		for {
			if got, err := s.GetMany(ctx, []string{name}); err == nil {
				l := got[0]
				if l.Token == 0 {
					l = elector.Lease{}
				}
				if !sent || l.Token != last.Token || l.Version != last.Version {
					select {
					case <-states:
					default:
					}
					states <- l
					last, sent = l, true
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-kick:
			case <-tick.C:
			}
		}
	}()
	return states, func() { stopNotify(); cancel(); <-done }
}

// requireState waits for the watch to receive want (the same Token and
// Version), skipping older states, and fails on a newer one.
func requireState(t *testing.T, ch <-chan elector.Lease, want elector.Lease, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.After(within)
	for {
		select {
		case got := <-ch:
			if got.Token == want.Token && got.Version == want.Version {
				if want.Token != 0 {
					assert.Equal(t, want.Name, got.Name)
					assert.Equal(t, want.Holder, got.Holder)
					assert.Equal(t, want.TTL, got.TTL)
				}
				return time.Since(start)
			}
			require.False(t, got.Token > want.Token || got.Token == want.Token && got.Version > want.Version,
				"received %+v, newer than %+v", got, want)
		case <-deadline:
			t.Fatalf("the watch did not receive token %d version %d within %v", want.Token, want.Version, within)
			return 0
		}
	}
}
