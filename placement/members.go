package placement

import (
	"slices"
	"strings"
	"time"
)

// Member is a live member of a group, as this replica last read it.
type Member struct {
	Holder   string
	Since    time.Time // when it joined, by its own wall clock (display only)
	Leases   []string  // the group's leases it holds, sorted
	Self     bool      // this replica
	Draining bool      // known for this replica only
}

// Members returns the live members as last read, this replica included,
// sorted by holder.
func (g *Group) Members() []Member {
	g.mu.Lock()
	defer g.mu.Unlock()
	byHolder := map[string]*Member{}
	for holder, since := range g.othersLocked() {
		byHolder[holder] = &Member{Holder: holder, Since: since}
	}
	for _, name := range g.leases {
		if m := byHolder[g.holders[name]]; m != nil {
			m.Leases = append(m.Leases, name)
		}
	}
	self := &Member{Holder: g.cfg.Holder, Since: g.joined, Self: true, Draining: g.draining}
	for name := range g.liveTermsLocked() {
		self.Leases = append(self.Leases, name)
	}
	byHolder[g.cfg.Holder] = self
	out := make([]Member, 0, len(byHolder))
	for _, m := range byHolder {
		slices.Sort(m.Leases)
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Holder, b.Holder) })
	return out
}

// Waiting returns the holders of the live members that wait for the lease
// name: every live member but a draining one and its holder, sorted. It is
// nil for a name not in the group.
func (g *Group) Waiting(name string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.isLease[name] {
		return nil
	}
	holder := g.holders[name]
	if _, mine := g.liveTermsLocked()[name]; mine {
		holder = g.cfg.Holder
	}
	var out []string
	for m := range g.othersLocked() {
		if m != holder {
			out = append(out, m)
		}
	}
	if !g.draining && holder != g.cfg.Holder {
		out = append(out, g.cfg.Holder)
	}
	slices.Sort(out)
	return out
}

// othersLocked returns the live members other than this replica, with
// when each joined (the latest of its live seats). g.mu is held.
func (g *Group) othersLocked() map[string]time.Time {
	out := map[string]time.Time{}
	for _, s := range g.seen {
		if !g.liveLocked(s) {
			continue
		}
		holder, joined := parseSeatHolder(s.lease.Holder)
		if holder == g.cfg.Holder {
			continue
		}
		if prev, ok := out[holder]; !ok || joined.After(prev) {
			out[holder] = joined
		}
	}
	return out
}

// liveTermsLocked drops the terms that have ended and returns the rest.
// g.mu is held.
func (g *Group) liveTermsLocked() map[string]*held {
	for name, h := range g.terms {
		if isClosed(h.term.Done()) {
			delete(g.terms, name)
		}
	}
	return g.terms
}
