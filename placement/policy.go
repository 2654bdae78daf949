package placement

import (
	"cmp"
	"slices"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// The policy's timings, as fractions of RetryInterval, and its pace.
const (
	// holdStep is the hold per lease this replica holds or is trying for,
	// so that the least-loaded member tries first: RetryInterval/holdStep.
	holdStep = 64
	// fullHold is added at or above the target: RetryInterval/fullHold.
	fullHold = 4
	// maxHold caps every balancing hold at RetryInterval/maxHold, well under
	// the RetryInterval within which a drained lease must be taken, and
	// under the hold of the member that yielded the lease (RetryInterval).
	maxHold = 2
	// yieldsPerRead is the most terms this replica yields per read of the
	// group.
	yieldsPerRead = 2
	// maxFutile caps the balancing pause after yields nobody took at
	// RetryInterval·2^maxFutile.
	maxFutile = 6
)

var _ elector.Placer = (*Group)(nil)

// Hold implements [elector.Placer]: how long the candidate for the lease
// name waits before it tries to take it. It grows with the leases this
// replica holds (and is trying for), and more at or above the target; it
// is a TTL while this replica drains, a RetryInterval for a lease it has
// just yielded, and otherwise 0 with NoBalance; always 0 after Close.
func (g *Group) Hold(name string) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return 0
	}
	if g.draining {
		g.drainHeld[name] = true
		return g.cfg.TTL
	}
	delete(g.drainHeld, name)
	r := g.cfg.RetryInterval
	now := g.clock.Now()
	delete(g.reserved, name) // its last attempt is over
	if at, ok := g.yielded[name]; ok {
		if left := r - now.Sub(at); left > 0 {
			return left
		}
		delete(g.yielded, name)
	}
	if g.cfg.NoBalance {
		return 0
	}
	for n, until := range g.reserved {
		if !now.Before(until) {
			delete(g.reserved, n)
		}
	}
	load := g.mineLocked() + len(g.reserved)
	d := r / holdStep * time.Duration(load)
	if load >= g.targetLocked() {
		d += r / fullHold
	}
	d = min(d, r/maxHold)
	g.reserved[name] = now.Add(d + r/holdStep) // until its attempt is over
	return d
}

// Lead implements [elector.Placer]: it counts the term among this
// replica's and returns the channel the group closes to have it yield, at
// once for a term won while draining after a hold from before the drain.
func (g *Group) Lead(name string, t elector.Term) <-chan struct{} {
	now := g.clock.Now()
	h := &held{term: t, started: now, yield: make(chan struct{})}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.terms[name] = h
	delete(g.reserved, name)
	delete(g.yielded, name)
	if _, ok := g.gave[name]; ok {
		delete(g.gave, name)
		g.futile = min(g.futile+1, maxFutile)
		g.pause = now.Add(g.cfg.RetryInterval << g.futile)
	}
	if g.draining && !g.drainHeld[name] {
		g.yieldLocked(name, h, now, "drain")
	}
	delete(g.drainHeld, name)
	return h.yield
}

// mineLocked returns how many live terms this replica holds that it has
// not yielded. g.mu is held.
func (g *Group) mineLocked() int {
	n := 0
	for _, h := range g.liveTermsLocked() {
		if !h.yielded {
			n++
		}
	}
	return n
}

// targetLocked returns T = ceil(L/N), for L leases and N live members
// (this replica counts unless it drains). g.mu is held.
func (g *Group) targetLocked() int {
	n := len(g.othersLocked())
	if !g.draining || n == 0 {
		n++
	}
	return (len(g.leases) + n - 1) / n
}

// balance yields this replica's oldest surplus terms: above T+1 at once,
// and above T to a member that has stayed below T, while another was above
// it, for (1+T) RetryIntervals (a replica that has just joined a rolling
// deploy usually gets the next drained replica's leases meanwhile). The
// members above T share the deficit in order of most leases first, then
// holder, so that they do not all yield for one short member.
func (g *Group) balance() {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clock.Now()
	if g.cfg.NoBalance || g.draining || g.closed || now.Before(g.pause) {
		return
	}
	target := g.targetLocked()
	others := g.othersLocked()
	counts := make(map[string]int, len(others)+1)
	for holder := range others {
		counts[holder] = 0
	}
	for _, name := range g.leases {
		if _, ok := others[g.holders[name]]; ok {
			counts[g.holders[name]]++
		}
	}
	var mine []string
	for name, h := range g.liveTermsLocked() {
		if !h.yielded {
			mine = append(mine, name)
		}
	}
	counts[g.cfg.Holder] = len(mine)
	type surplus struct {
		holder string
		n      int
	}
	var over []surplus
	for holder, n := range counts {
		if n > target {
			over = append(over, surplus{holder, n})
		}
	}
	settle := time.Duration(1+target) * g.cfg.RetryInterval
	deficit, settled := 0, 0 // leases short of T: of every member, of those short for settle
	for holder, n := range counts {
		if n >= target || len(over) == 0 {
			delete(g.short, holder)
			continue
		}
		deficit += target - n
		since, ok := g.short[holder]
		if !ok {
			g.short[holder] = now
		} else if now.Sub(since) >= settle {
			settled += target - n
		}
	}
	for holder := range g.short {
		if _, ok := counts[holder]; !ok {
			delete(g.short, holder)
		}
	}
	slices.SortFunc(over, func(a, b surplus) int {
		return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.holder, b.holder))
	})
	// Above T+1 first, from the whole deficit; then the last one above T,
	// from the settled part of what is left.
	give := 0
	for _, m := range over {
		n := min(m.n-target-1, deficit)
		deficit -= n
		if m.holder == g.cfg.Holder {
			give = n
		}
	}
	settled = min(settled, deficit)
	for _, m := range over {
		if settled == 0 {
			break
		}
		settled--
		if m.holder == g.cfg.Holder {
			give++
		}
	}
	give = min(give, yieldsPerRead)
	if give <= 0 {
		return
	}
	slices.SortFunc(mine, func(a, b string) int { return g.terms[a].started.Compare(g.terms[b].started) })
	for _, name := range mine[:give] {
		g.yieldLocked(name, g.terms[name], now, "balance", "held", len(mine), "target", target, "members", len(others)+1)
		g.gave[name] = true
	}
}

// yieldLocked closes h's yield channel, if it is still open, holds the
// lease name back for a RetryInterval, and logs why, with attrs. g.mu is
// held.
func (g *Group) yieldLocked(name string, h *held, now time.Time, why string, attrs ...any) {
	if h.yielded {
		return
	}
	h.yielded = true
	close(h.yield)
	g.yielded[name] = now
	g.cfg.Logger.Debug("placement: yield", append([]any{"group", g.cfg.Name, "holder", g.cfg.Holder, "lease", name, "why", why}, attrs...)...)
}
