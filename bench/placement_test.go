package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"text/tabwriter"
	"time"
)

// simSeeds is how many seeds each scenario runs under each policy: the seed
// sets the replicas' start offsets, the order each starts its jobs in, and
// the moments the scenario acts. Under the race detector, which makes the
// simulation about five times slower, it runs 3, so CI stays fast.
var simSeeds = map[bool]int{false: 21, true: 3}[raceEnabled]

// simSettle is how long a scenario waits for the leases to settle, before it
// acts and after: under placement the last move came at most 20 s after a
// crash, 12 s into a cold start.
const simSettle = 2 * simTTL

const (
	simReady   = 10 * time.Second // a new replica's start to its readiness, in a rolling deploy
	simSpread  = time.Second      // the spread of the replicas' start times at a cold start
	simStagger = 20 * time.Second // between the replicas' starts, staggered
)

// scenario is one thing that happens to a group of replicas; run returns
// what the ledger measured from the moment it acts.
type scenario struct {
	name string
	run  func(w *world) outcome
}

var scenarios = []scenario{
	{"cold start", func(w *world) outcome {
		t0 := time.Now()
		w.startAll(simReplicas, simSpread)
		time.Sleep(simSettle)
		return w.led.measure(t0, -1, nil, w.names)
	}},
	{"staggered start", func(w *world) outcome {
		t0 := time.Now()
		for i := range simReplicas {
			time.Sleep(time.Until(t0.Add(time.Duration(i)*simStagger + w.jitter(simSpread))))
			w.start(w.add())
		}
		time.Sleep(simSettle)
		return w.led.measure(t0, -1, nil, w.names)
	}},
	{"rolling deploy", func(w *world) outcome { return w.rolling(true) }},
	{"rolling, stop first", func(w *world) outcome { return w.rolling(false) }},
	{"crash", func(w *world) outcome {
		w.settled()
		time.Sleep(w.jitter(simTTL / 3)) // any phase of the renewals
		r := w.busiest()
		t0 := time.Now()
		w.crash(r)
		time.Sleep(simSettle)
		return w.led.measure(t0, r.id, r.store.LastWrite, w.names)
	}},
	{"drain", func(w *world) outcome {
		w.settled()
		r := w.busiest()
		t0 := time.Now()
		if err := r.m.drain(context.Background()); errors.Is(err, errors.ErrUnsupported) {
			w.stopJobs(r) // without a drain, stop the replica's jobs
		} else if err != nil {
			w.t.Fatal(err)
		}
		time.Sleep(simSettle)
		return w.led.measure(t0, r.id, nil, w.names)
	}},
}

// rolling replaces each replica in turn: with surge, the new one starts,
// becomes ready and then the old one stops (Kubernetes' maxSurge); without,
// the old one stops first.
func (w *world) rolling(surge bool) outcome {
	old := w.settled()
	t0 := time.Now()
	for _, r := range old {
		if !surge {
			w.stop(r)
		}
		w.start(w.add())
		time.Sleep(simReady + w.jitter(simSpread))
		if surge {
			w.stop(r)
		}
	}
	time.Sleep(simSettle)
	return w.led.measure(t0, -1, nil, w.names)
}

// settled starts the replicas at once and waits for the leases to settle.
func (w *world) settled() []*replica {
	reps := w.startAll(simReplicas, simSpread)
	time.Sleep(simSettle)
	return reps
}

// busiest returns the replica that runs the most inner jobs now (the first
// of them): the one whose crash or drain moves the most leases.
func (w *world) busiest() *replica {
	w.led.mu.Lock()
	defer w.led.mu.Unlock()
	count := make([]int, len(w.reps))
	for _, reps := range w.led.runs {
		for rep := range reps {
			count[rep]++
		}
	}
	best := 0
	for i, c := range count {
		if c > count[best] {
			best = i
		}
	}
	return w.reps[best]
}

// jitter returns a duration in [0, d] of the seed's choosing.
func (w *world) jitter(d time.Duration) time.Duration {
	return time.Duration(w.rng.Int64N(int64(d) + 1))
}

var policies = []policy{firstWinsPolicy, placementPolicy}

// TestPlacementSimulation runs every scenario under every policy for
// simSeeds seeds, prints a table of what it measured (go test -v), and
// checks the goals of issue 21 for the placement policy.
func TestPlacementSimulation(t *testing.T) {
	type key struct{ scenario, policy string }
	results := map[key][]outcome{}
	for _, sc := range scenarios {
		for _, pol := range policies {
			for seed := range uint64(simSeeds) {
				var out outcome
				synctest.Test(t, func(t *testing.T) {
					w := newWorld(t, pol, seed)
					out = sc.run(w)
				})
				if out.overlaps != 0 {
					t.Errorf("%s, %s, seed %d: %d starts while another replica ran the job", sc.name, pol.name, seed, out.overlaps)
				}
				results[key{sc.name, pol.name}] = append(results[key{sc.name, pol.name}], out)
			}
		}
	}

	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "scenario\tpolicy\tmax share (mean/max)\thandoffs (mean/max)\tno leader, total s (mean)\tlongest s (max)\trecover s (max)\toverlaps\t\n")
	for _, sc := range scenarios {
		for _, pol := range policies {
			s := summarize(results[key{sc.name, pol.name}])
			fmt.Fprintf(tw, "%s\t%s\t%.1f / %d\t%.1f / %d\t%.1f\t%.1f\t%s\t%d\t\n",
				sc.name, pol.name, s.shareMean, s.shareMax, s.handoffMean, s.handoffMax,
				s.gapTotalMean.Seconds(), s.gapMax.Seconds(), s.recoverText(sc.name), s.overlaps)
		}
	}
	tw.Flush()
	t.Logf("%d leases on %d replicas, TTL %v, RetryInterval %v, %d seeds each:\n%s", simLeases, simReplicas, simTTL, simRetry, simSeeds, b.String())

	for _, g := range goals {
		err := g.check(results[key{g.scenario, placementPolicy.name}])
		switch {
		case err != nil && g.mean && raceEnabled:
			t.Logf("placement, %s: %v (not checked under -race: it runs 3 seeds, too few for a goal on the mean of 21; run without -race)", g.scenario, err)
		case err != nil:
			t.Errorf("placement, %s: %v", g.scenario, err)
		}
	}
}

// goals are issue 21's goals for the placement policy, 50 leases on 5
// replicas; mean marks a goal on a mean over the seeds.
var goals = []struct {
	scenario string
	mean     bool
	check    func([]outcome) error
}{
	{"cold start", false, func(outs []outcome) error {
		const bound = (simLeases+simReplicas-1)/simReplicas + 1 // T+1
		for seed, o := range outs {
			if o.maxShare > bound {
				return fmt.Errorf("seed %d: one replica leads %d leases once settled, want at most T+1 = %d", seed, o.maxShare, bound)
			}
		}
		return nil
	}},
	{"rolling deploy", true, func(outs []outcome) error {
		const bound = 1.1 * simLeases
		if m := summarize(outs).handoffMean; m > bound {
			return fmt.Errorf("%.1f handoffs per deploy on average, want at most %.0f (1.1 per lease)", m, bound)
		}
		return nil
	}},
	{"crash", false, func(outs []outcome) error {
		for seed, o := range outs {
			if o.recover > simTTL+simRetry {
				return fmt.Errorf("seed %d: a lease of the crashed replica ran again %v after its last write, want at most TTL + RetryInterval = %v", seed, o.recover, simTTL+simRetry)
			}
		}
		return nil
	}},
	{"drain", false, func(outs []outcome) error {
		for seed, o := range outs {
			if o.recover > simRetry {
				return fmt.Errorf("seed %d: a lease of the drained replica ran elsewhere %v after Drain, want at most one RetryInterval = %v", seed, o.recover, simRetry)
			}
		}
		return nil
	}},
}

// summary is a scenario's outcomes over its seeds.
type summary struct {
	shareMean, handoffMean float64
	shareMax, handoffMax   int
	gapTotalMean, gapMax   time.Duration
	recover                time.Duration
	overlaps               int
}

func summarize(outs []outcome) summary {
	var s summary
	var gapTotal time.Duration
	for _, o := range outs {
		s.shareMean += float64(o.maxShare) / float64(len(outs))
		s.handoffMean += float64(o.handoffs) / float64(len(outs))
		s.shareMax = max(s.shareMax, o.maxShare)
		s.handoffMax = max(s.handoffMax, o.handoffs)
		gapTotal += o.gapTotal
		s.gapMax = max(s.gapMax, o.gapMax)
		s.recover = max(s.recover, o.recover)
		s.overlaps += o.overlaps
	}
	s.gapTotalMean = gapTotal / time.Duration(len(outs))
	return s
}

// recoverText is the recover column: only the crash (from the crashed
// replica's last write) and drain (from the drain) scenarios follow one
// replica's leases.
func (s summary) recoverText(scenario string) string {
	if scenario != "crash" && scenario != "drain" {
		return "-"
	}
	return fmt.Sprintf("%.1f", s.recover.Seconds())
}

// The ledger counts a move, a gap from a stop or a crash to the next start,
// a start while another inner job runs, and the recovery of the leases the
// crashed replica led, from its last write.
func TestLedgerMeasure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l ledger
		l.init(2)
		for range 3 {
			l.addReplica()
		}
		begin := time.Now()
		at := func(s int) { time.Sleep(time.Until(begin.Add(time.Duration(s) * time.Second))) }
		l.started(0, 0)
		l.started(1, 1)
		at(10)
		t0 := time.Now()
		at(12)
		l.stopped(0, 0)
		at(13)
		l.started(0, 2) // a move after a 1 s gap
		at(15)
		l.crash(1)
		at(20)
		l.started(1, 2) // a move 5 s after the crash, while the crashed replica's job still runs
		at(22)
		l.stopped(1, 1)
		at(30)
		wrote := func(string) time.Time { return begin.Add(14 * time.Second) }
		got := l.measure(t0, 1, wrote, []string{"a", "b"})
		want := outcome{maxShare: 2, handoffs: 2, gapTotal: 6 * time.Second, gapMax: 5 * time.Second, overlaps: 1, recover: 6 * time.Second}
		if got != want {
			t.Errorf("measure = %+v, want %+v", got, want)
		}
	})
}
