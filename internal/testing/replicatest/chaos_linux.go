//go:build linux

package replicatest

import (
	"context"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var (
	chaosDuration = flag.Duration("chaos.duration", 20*time.Second, "how long TestChaosProcesses runs its schedule")
	chaosSeed     = flag.Uint64("chaos.seed", 0, "seed of TestChaosProcesses' schedule (0: a random one, logged)")
)

const (
	chaosReplicas = 4
	chaosEvery    = 50 * time.Millisecond // the leaders' write period
	// chaosRecover bounds the wait for a new leader after each action.
	chaosRecover = 15 * time.Second
)

// Write is one fenced write of a replica (see helperproc.WriteFunc) that
// committed.
type Write struct {
	Order  int64 // its place in commit order
	Token  uint64
	Holder string
	N      int64     // the writer's number for it (its WROTE line)
	At     time.Time // the writer's clock, as it wrote
}

// ChaosStore is a store's part of Chaos.
type ChaosStore struct {
	// Args are the flags of the store's helper in mode replica; Chaos adds
	// the replica flags.
	Args []string
	// Read returns the replicas' committed writes, in commit order.
	Read func(context.Context) ([]Write, error)
	// PauseHoldsLocks: a paused leader may hold database locks that keep
	// candidates from taking over until it resumes, so a pause longer than
	// the TTL may lengthen a leaderless gap by its excess.
	PauseHoldsLocks bool
	// Save, if set, saves the lease row of helperproc.LeaseName as it is
	// now, if it is held, and returns a function that writes it back and reports
	// whether it did (nil if nothing was saved), as a failover to a replica that lagged or a restore of a
	// backup would: Chaos then rolls the row back while replicas run. The
	// write-back goes only over the same term or a released row: one that
	// loses a live holder's takeover lets a candidate that missed it lead
	// while that holder still trusts its term, whatever the protocol.
	Save func(context.Context) (restore func(context.Context) (bool, error), err error)
}

// Rollbacks (ChaosStore.Save): the lease row is saved every 1–3 s and
// written back 0.6–1.5 s later (one to three renewals).
const (
	minRollbackAfter, maxRollbackAfter = 600 * time.Millisecond, 1500 * time.Millisecond
	minRollbackEvery, maxRollbackEvery = time.Second, 3 * time.Second
	// minRollbackTries is how many write-backs a run must have tried before
	// it must have landed one: a short run (20 s) may see every one miss.
	minRollbackTries = 20
)

// Chaos runs four replicas as processes, each with a store of its own, for
// -chaos.duration. Once a leader has written and led for 1–2 s, it
// crashes it (SIGKILL), pauses it for 0.3–3 s (SIGSTOP, SIGCONT) or stops
// it gracefully (SIGTERM), then waits for a leader again; crashed and
// stopped replicas are started again after 0.3–1 s, under new holder
// names. Then it reads the committed writes with s.Read and checks them
// with checkChaos.
func Chaos(t *testing.T, s ChaosStore) {
	c := newCluster(t, slices.Concat(s.Args, []string{"-every", chaosEvery.String()}, procTimings())...)
	seed := *chaosSeed
	if seed == 0 {
		seed = mrand.Uint64()
	}
	t.Logf("chaos: %d replicas for %v, seed %d (rerun with -chaos.seed=%d)", chaosReplicas, *chaosDuration, seed, seed)
	rnd := mrand.New(mrand.NewPCG(seed, seed))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rnd.Int64N(int64(hi-lo)+1)) }

	gen := make(map[int]int)
	startSlot := func(slot int) {
		gen[slot]++
		c.start(fmt.Sprintf("r%d.%d", slot, gen[slot]))
	}
	type restart struct {
		slot    int
		at      time.Time
		waitFor string // a holder that must exit first ("" for none)
		killAt  time.Time
	}
	var pending []restart
	var (
		restoreRow func(context.Context) (bool, error) // saved, to write back at rollAt
		rollAt     = time.Now().Add(between(minRollbackEvery, maxRollbackEvery))
		rollbacks  []time.Time
		tries      int // write-backs attempted
	)
	// roll saves the lease row or writes it back when that is due. A
	// write-back only lands if the term it saved still holds (or the row is
	// released), so one that misses saves the row again at once.
	roll := func() {
		if s.Save == nil || time.Now().Before(rollAt) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if restoreRow == nil {
			restore, err := s.Save(ctx)
			if err != nil {
				t.Logf("rollback: save the lease row: %v", err)
			}
			if restoreRow = restore; restore != nil {
				rollAt = time.Now().Add(between(minRollbackAfter, maxRollbackAfter))
				return
			}
		} else {
			at := time.Now() // before the write: the gap bound counts from here
			tries++
			wrote, err := restoreRow(ctx)
			switch {
			case err != nil:
				t.Logf("rollback: write the lease row back: %v", err)
			case wrote:
				rollbacks = append(rollbacks, at)
			}
			restoreRow = nil
			if !wrote {
				return // the term changed meanwhile: save the row again at once
			}
		}
		rollAt = time.Now().Add(between(minRollbackEvery, maxRollbackEvery))
	}
	tick := func() {
		roll()
		now := time.Now()
		kept := pending[:0]
		for _, r := range pending {
			if r.waitFor != "" {
				select {
				case <-c.exited(r.waitFor):
					r.waitFor = ""
				default:
					if now.After(r.killAt) {
						t.Errorf("%s did not exit within 5s of SIGTERM", r.waitFor)
						c.signal(r.waitFor, syscall.SIGKILL)
						r.killAt = now.Add(time.Hour)
					}
				}
			}
			if r.waitFor == "" && now.After(r.at) {
				startSlot(r.slot)
				continue
			}
			kept = append(kept, r)
		}
		pending = kept
	}
	waitUntil := func(timeout time.Duration, cond func() bool) bool {
		deadline := time.Now().Add(timeout)
		for {
			tick()
			if cond() {
				return true
			}
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	sleep := func(d time.Duration) { waitUntil(d, func() bool { return false }) }

	for slot := range chaosReplicas {
		startSlot(slot)
	}
	var kills, pauses, stops int
	end := time.Now().Add(*chaosDuration)
	for time.Now().Before(end) {
		var lead line
		if !waitUntil(chaosRecover, func() bool {
			var ok bool
			lead, ok = c.leader()
			return ok && c.wrote(lead, lead.at)
		}) {
			t.Errorf("no leader that writes for %v", chaosRecover)
			break
		}
		sleep(between(time.Second, 2*time.Second))
		if cur, ok := c.leader(); !ok || cur.token != lead.token {
			continue // it lost its term on its own
		}
		slot := slotOf(lead.holder)
		var kind string
		resumed := time.Time{}
		switch x := rnd.Float64(); {
		case x < 0.35:
			kind = "crash"
			kills++
			c.kill(lead.holder)
			pending = append(pending, restart{slot: slot, at: time.Now().Add(between(300*time.Millisecond, time.Second))})
		case x < 0.7:
			kind = "pause"
			pauses++
			c.signal(lead.holder, syscall.SIGSTOP)
			sleep(between(300*time.Millisecond, 3*time.Second))
			c.signal(lead.holder, syscall.SIGCONT)
			resumed = time.Now()
		default:
			kind = "stop"
			stops++
			c.signal(lead.holder, syscall.SIGTERM)
			now := time.Now()
			pending = append(pending, restart{slot: slot, at: now.Add(between(300*time.Millisecond, time.Second)),
				waitFor: lead.holder, killAt: now.Add(5 * time.Second)})
		}
		if !waitUntil(chaosRecover, func() bool {
			cur, ok := c.leader()
			return ok && (cur.token > lead.token || kind == "pause" && cur.token == lead.token && c.wrote(cur, resumed.Add(procRenew)))
		}) {
			t.Errorf("no leader within %v after the %s of %s (token %d)", chaosRecover, kind, lead.holder, lead.token)
		}
	}
	c.stopAll()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := s.Read(ctx)
	if err != nil {
		t.Fatalf("read the writes: %v", err)
	}
	lines, ps := c.snapshot()
	b := chaosBounds{ttl: procTTL, base: procTTL + procRetry + chaosEvery + procMargin, perTerm: procTTL + procRetry + 500*time.Millisecond,
		pauseHoldsLocks: s.PauseHoldsLocks, retry: procRetry, rollbacks: rollbacks}
	rep := checkChaos(rows, lines, ps, b)
	for i, v := range rep.violations {
		if i == 20 {
			t.Errorf("... and %d more violations", len(rep.violations)-i)
			break
		}
		t.Error(v)
	}
	for _, e := range rep.excused {
		t.Log("excused: " + e)
	}
	for i, e := range rep.errors {
		if i == 10 {
			t.Logf("... and %d more error lines", len(rep.errors)-i)
			break
		}
		t.Log(e)
	}
	if s.Save != nil {
		t.Logf("chaos: %d rollbacks of the lease row in %d tries", len(rollbacks), tries)
		if len(rollbacks) == 0 && tries >= minRollbackTries {
			t.Errorf("the lease row was never rolled back")
		}
	}
	if kills+pauses+stops == 0 || rep.terms < 2 {
		t.Errorf("no chaos: %d crashes, %d pauses, %d stops, %d terms with writes", kills, pauses, stops, rep.terms)
	}
	t.Logf("chaos: %d crashes, %d pauses, %d graceful stops; %d terms, %d with writes, %d writes committed, %d refused; "+
		"%d error lines; longest leaderless gap %v (bound %v%s); %d violations",
		kills, pauses, stops, rep.started, rep.terms, len(rows), rep.refused, len(rep.errors),
		rep.longest.length.Round(time.Millisecond), rep.longest.bound.Round(time.Millisecond), parens(rep.longest.why), len(rep.violations))
}

// slotOf returns the slot of a holder named r<slot>.<generation>.
func slotOf(holder string) int {
	s, _, _ := strings.Cut(strings.TrimPrefix(holder, "r"), ".")
	n, _ := strconv.Atoi(s)
	return n
}

func parens(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// leader returns the START line of the term whose job runs now, in a
// process the test neither killed nor saw die.
func (c *cluster) leader() (line, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.lines) - 1; i >= 0; i-- {
		l := c.lines[i]
		if l.kind != "START" {
			continue
		}
		if p := c.procs[l.holder]; !p.killed.IsZero() || p.paused {
			return line{}, false
		}
		for _, m := range c.lines[i+1:] {
			if m.holder == l.holder && (m.kind == "STOP" || m.kind == "DEAD") {
				return line{}, false
			}
		}
		return l, true
	}
	return line{}, false
}

// wrote reports whether start's term has committed a write read after
// since.
func (c *cluster) wrote(start line, since time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.lines) - 1; i >= 0; i-- {
		l := c.lines[i]
		if l.at.Before(since) {
			return false
		}
		if l.kind == "WROTE" && l.holder == start.holder && l.token == start.token {
			return true
		}
	}
	return false
}

// chaosBounds are what checkChaos derives its bound on gaps from.
type chaosBounds struct {
	ttl time.Duration
	// base bounds a leaderless gap that nothing else explains, from the
	// last write of a term to the first of the next: TTL + RetryInterval +
	// the write period + margin. The old leader wrote last at most one
	// period before it crashed or froze, after its last renewal; candidates
	// watching it see that renewal unchanged for its TTL and take over at
	// most one RetryInterval later (or at once, after a release).
	base time.Duration
	// perTerm is what each term that started inside the gap without
	// writing adds.
	perTerm time.Duration
	// pauseHoldsLocks: a pause of the old leader longer than the TTL adds
	// its excess.
	pauseHoldsLocks bool
	// rollbacks are when the test wrote a saved lease row back. One inside
	// a gap ends the leader's term at its next renewal, and candidates
	// watch the older state from when they see it, within a retry: the gap
	// may last up to base and retry from the write-back.
	rollbacks []time.Time
	retry     time.Duration
}

// gap is the time between the last write of one term and the first write
// of the next.
type gap struct {
	length, bound time.Duration
	why           string
}

type chaosReport struct {
	violations, excused []string
	started, terms      int      // terms started, and terms that wrote
	refused             int      // refused fenced writes (REFUSED lines)
	errors              []string // ERROR lines
	longest             gap
}

// checkChaos checks the committed writes rows (in commit order) and the
// replicas' lines:
//
//  1. every token was started once, by one holder, and every row's token
//     was started by the row's holder;
//  2. no write commits with a token lower than one committed before it:
//     a stale leader's write never gets through the fence;
//  3. each term's writes are contiguous in commit order: the writes of two
//     holders never interleave;
//  4. every write a replica reported committed (WROTE) is there;
//  5. no two jobs of different terms ran at once (see overlaps);
//  6. no leaderless gap between the writes of two terms exceeds its bound
//     (see chaosBounds).
func checkChaos(rows []Write, lines []line, pauses []pause, b chaosBounds) chaosReport {
	var rep chaosReport
	violate := func(format string, args ...any) {
		rep.violations = append(rep.violations, fmt.Sprintf(format, args...))
	}

	startedBy := make(map[uint64]line)
	for _, l := range lines {
		switch l.kind {
		case "START":
			rep.started++
			if s, dup := startedBy[l.token]; dup {
				violate("token %d started twice: by %s and by %s", l.token, s.holder, l.holder)
			}
			startedBy[l.token] = l
		case "REFUSED":
			rep.refused++
		case "ERROR":
			rep.errors = append(rep.errors, l.text)
		case "BAD":
			violate("%s printed an unexpected line: %q", l.holder, l.text)
		}
	}

	committed := make(map[string]bool)
	finished := make(map[uint64]bool)
	var cur, newest *Write
	for i := range rows {
		w := &rows[i]
		committed[fmt.Sprintf("%s/%d", w.Holder, w.N)] = true
		switch s, ok := startedBy[w.Token]; {
		case !ok:
			violate("write %d of %s carries token %d, which nobody started", w.N, w.Holder, w.Token)
		case s.holder != w.Holder:
			violate("write %d of %s carries token %d, which %s started", w.N, w.Holder, w.Token, s.holder)
		}
		if cur != nil && w.Order <= cur.Order {
			violate("the writes are not in commit order: %d after %d", w.Order, cur.Order)
		}
		if newest != nil && w.Token < newest.Token {
			violate("write %d of %s with token %d committed after write %d of %s with newer token %d: a stale write got through the fence",
				w.N, w.Holder, w.Token, newest.N, newest.Holder, newest.Token)
		}
		if newest == nil || w.Token > newest.Token {
			newest = w
		}
		switch {
		case cur == nil:
			rep.terms++
		case w.Token != cur.Token:
			finished[cur.Token] = true
			if finished[w.Token] {
				violate("write %d of %s (token %d) follows a write of token %d, after token %d had written: the terms' writes interleave",
					w.N, w.Holder, w.Token, cur.Token, w.Token)
			} else {
				rep.terms++
			}
			g := gap{length: w.At.Sub(cur.At)}
			g.bound, g.why = b.gapBound(*cur, *w, lines, pauses)
			if g.length > g.bound {
				violate("leaderless for %v, from the last write of token %d (%s, %s) to the first of token %d (%s, %s): bound %v%s",
					g.length, cur.Token, cur.Holder, cur.At.Format(timeFormat), w.Token, w.Holder, w.At.Format(timeFormat), g.bound, parens(g.why))
			}
			if g.length > rep.longest.length {
				rep.longest = g
			}
		}
		cur = w
	}
	for _, l := range lines {
		if l.kind == "WROTE" && !committed[fmt.Sprintf("%s/%d", l.holder, l.n)] {
			violate("write %d of %s (token %d) was reported committed but is not there", l.n, l.holder, l.token)
		}
	}
	v, excused := overlaps(jobRuns(lines), pauses, resumeStop)
	rep.violations = append(rep.violations, v...)
	rep.excused = excused
	return rep
}

// gapBound returns the bound on the gap between from, the last write of a
// term, and to, the first of the next, and what raised it above base.
func (b chaosBounds) gapBound(from, to Write, lines []line, pauses []pause) (time.Duration, string) {
	bound, why := b.base, ""
	if b.pauseHoldsLocks {
		var excess time.Duration
		for _, p := range pauses {
			if p.holder == from.Holder && p.start.Before(to.At) && !p.end.IsZero() && p.end.After(from.At) {
				excess = max(excess, p.end.Sub(p.start)-b.ttl)
			}
		}
		if excess > 0 {
			bound += excess
			why = fmt.Sprintf("a pause of %s adds %v", from.Holder, excess.Round(time.Millisecond))
		}
	}
	terms := 0
	for _, l := range lines {
		if l.kind == "START" && l.token != from.Token && l.token != to.Token && l.at.After(from.At) && l.at.Before(to.At) {
			terms++
		}
	}
	if terms > 0 {
		bound += time.Duration(terms) * b.perTerm
		if why != "" {
			why += ", "
		}
		why += fmt.Sprintf("%d terms without writes", terms)
	}
	for _, r := range b.rollbacks {
		if r.After(from.At) && r.Before(to.At) {
			if rb := r.Sub(from.At) + b.base + b.retry; rb > bound {
				bound, why = rb, fmt.Sprintf("a rollback of the lease row %v into the gap", r.Sub(from.At).Round(time.Millisecond))
			}
		}
	}
	return bound, why
}
