package placement

import (
	"context"
	"fmt"

	"github.com/leaderaware/leaderaware/elector"
)

// Drain gives up every lease this replica holds to the other members, all
// at once, and returns when it holds none, or with ctx's error. It first
// leaves its seat, so the others stop counting it; until [Group.Resume] it
// stays out of the seats and waits a TTL before each attempt to take a
// lease, so it leads only what no other member takes.
func (g *Group) Drain(ctx context.Context) error {
	g.mu.Lock()
	first := !g.draining
	g.draining = true
	seat := g.seat
	g.seat = nil
	g.mu.Unlock()
	if first {
		g.cfg.Logger.Info("placement: draining", "group", g.cfg.Name, "holder", g.cfg.Holder)
	}
	if err := g.leave(ctx, seat); err != nil {
		g.cfg.Logger.Warn("placement: drain", "group", g.cfg.Name, "err", err) // the seat runs out
	}
	g.mu.Lock()
	var terms []elector.Term
	now := g.clock.Now()
	for name, h := range g.liveTermsLocked() {
		g.yieldLocked(name, h, now, "drain")
		terms = append(terms, h.term)
	}
	g.mu.Unlock()
	for _, t := range terms {
		select {
		case <-t.Done():
		case <-ctx.Done():
			return fmt.Errorf("placement: drain group %q: %w", g.cfg.Name, ctx.Err())
		}
	}
	if first {
		g.cfg.Logger.Info("placement: drained", "group", g.cfg.Name, "holder", g.cfg.Holder, "leases", len(terms))
	}
	return nil
}

// Handoff gives up the lease name, which this replica must hold, to the
// other members, and returns when its term has ended, or with ctx's error.
// This replica then waits a RetryInterval before it tries to take it again.
func (g *Group) Handoff(ctx context.Context, name string) error {
	g.mu.Lock()
	h := g.liveTermsLocked()[name]
	if h == nil {
		g.mu.Unlock()
		return fmt.Errorf("placement: lease %q is not held by this replica (%q) in group %q; Handoff gives up a lease it leads", name, g.cfg.Holder, g.cfg.Name)
	}
	g.yieldLocked(name, h, g.clock.Now(), "handoff")
	g.mu.Unlock()
	select {
	case <-h.term.Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("placement: hand off lease %q: %w", name, ctx.Err())
	}
}

// Resume ends a drain: this replica reads the group and takes a seat again
// at once, and campaigns as any member does.
func (g *Group) Resume() {
	g.mu.Lock()
	was := g.draining
	g.draining = false
	g.mu.Unlock()
	if was {
		g.cfg.Logger.Info("placement: resumed", "group", g.cfg.Name, "holder", g.cfg.Holder)
		select {
		case g.kick <- struct{}{}:
		default:
		}
	}
}
