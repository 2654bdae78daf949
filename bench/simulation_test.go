package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/crashstore"
	"github.com/leaderaware/leaderaware/placement"
)

// The simulation of TestPlacementSimulation: replicas of one app, each a
// set of decorated fake jobs (one per lease) on its own Store value over one
// shared MemoryStore (so each replica has its own renewal schedule and
// watch, as a process has), in a synctest bubble where time is free. The
// timings are the library's defaults.
const (
	simLeases   = 50
	simReplicas = 5
	simTTL      = elector.DefaultTTL
	simRetry    = elector.DefaultRetryInterval
)

var discardLogger = slog.New(slog.DiscardHandler)

// policy is how a replica places its leases: first-wins (plain electors) or
// a placement group.
type policy struct {
	name string
	join func(s elector.Store, holder string) (member, error)
}

// member is one replica's part in its policy.
type member interface {
	elector(name string) (*elector.LeaseElector, error)
	start(ctx context.Context) error
	// drain gives up every lease the replica holds and returns when it
	// holds none; errors.ErrUnsupported if the policy cannot.
	drain(ctx context.Context) error
	close(ctx context.Context) error
}

// firstWins is a replica without a group: whoever campaigns first leads.
type firstWins struct {
	s      elector.Store
	holder string
}

var firstWinsPolicy = policy{
	name: "first-wins",
	join: func(s elector.Store, holder string) (member, error) { return firstWins{s, holder}, nil },
}

func (f firstWins) elector(name string) (*elector.LeaseElector, error) {
	return elector.New(f.s, name, elector.Config{Holder: f.holder})
}
func (firstWins) start(context.Context) error { return nil }
func (firstWins) drain(context.Context) error { return errors.ErrUnsupported }
func (firstWins) close(context.Context) error { return nil }

// grouped is a replica in a placement group.
type grouped struct{ g *placement.Group }

var placementPolicy = policy{
	name: "placement",
	join: func(s elector.Store, holder string) (member, error) {
		g, err := placement.New(s, placement.Config{Name: "sim", Holder: holder, Logger: discardLogger})
		return grouped{g}, err
	},
}

func (m grouped) elector(name string) (*elector.LeaseElector, error) {
	return m.g.Elector(name, elector.Config{})
}
func (m grouped) start(ctx context.Context) error { return m.g.Start(ctx) }
func (m grouped) drain(ctx context.Context) error { return m.g.Drain(ctx) }
func (m grouped) close(ctx context.Context) error { return m.g.Close(ctx) }

// world is one run of one scenario under one policy and seed.
type world struct {
	t     *testing.T
	rng   *rand.Rand
	mem   *elector.MemoryStore
	pol   policy
	names []string
	led   *ledger
	reps  []*replica
}

// replica is one process: its Store value, its member and its decorated
// jobs, one per lease (jobs[i] runs names[i]).
type replica struct {
	id      int
	holder  string
	store   *crashstore.Store
	m       member
	jobs    []decorator.Job
	stopped bool
}

func newWorld(t *testing.T, pol policy, seed uint64) *world {
	w := &world{
		t:   t,
		rng: rand.New(rand.NewPCG(seed, 21)),
		mem: elector.NewMemoryStore(),
		pol: pol,
		led: &ledger{},
	}
	for i := range simLeases {
		w.names = append(w.names, fmt.Sprintf("job-%02d", i))
	}
	w.led.init(simLeases)
	t.Cleanup(w.shutdown)
	return w
}

// add makes the next replica, ready to start.
func (w *world) add() *replica {
	w.t.Helper()
	r := &replica{id: len(w.reps), holder: fmt.Sprintf("replica-%d", len(w.reps))}
	r.store = crashstore.New(w.mem)
	m, err := w.pol.join(r.store, r.holder)
	if err != nil {
		w.t.Fatal(err)
	}
	r.m = m
	for i, name := range w.names {
		e, err := m.elector(name)
		if err != nil {
			w.t.Fatal(err)
		}
		inner := &simJob{led: w.led, lease: i, rep: r.id}
		r.jobs = append(r.jobs, decorator.Decorate[decorator.Job](inner, e, decorator.WithLogger(discardLogger)))
	}
	w.reps = append(w.reps, r)
	w.led.addReplica()
	return r
}

// start starts r: its member, then its jobs in an order of the seed's
// choosing, as an app starts its jobs one after another.
func (w *world) start(r *replica) {
	w.t.Helper()
	ctx := context.Background()
	if err := r.m.start(ctx); err != nil {
		w.t.Fatal(err)
	}
	for _, i := range w.rng.Perm(len(r.jobs)) {
		if err := r.jobs[i].Start(ctx); err != nil {
			w.t.Fatal(err)
		}
	}
}

// startAll adds and starts n replicas, each at an offset of up to spread
// (seeded), in the order of their offsets.
func (w *world) startAll(n int, spread time.Duration) []*replica {
	offsets := make([]time.Duration, n)
	for i := range offsets {
		offsets[i] = time.Duration(w.rng.Int64N(int64(spread) + 1))
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(offsets[a], offsets[b]) })
	reps := make([]*replica, n)
	for i := range reps {
		reps[i] = w.add()
	}
	begin := time.Now()
	for _, i := range order {
		time.Sleep(time.Until(begin.Add(offsets[i])))
		w.start(reps[i])
	}
	return reps
}

// stop shuts r down gracefully: drains it if the policy can (and returns
// when it holds no lease), then stops its jobs (freeing the leases it still
// holds) and closes its member, as an app's shutdown does.
func (w *world) stop(r *replica) {
	w.t.Helper()
	ctx := context.Background()
	if err := r.m.drain(ctx); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		w.t.Fatalf("drain %s: %v", r.holder, err)
	}
	w.stopJobs(r)
	if err := r.m.close(ctx); err != nil {
		w.t.Fatalf("close %s: %v", r.holder, err)
	}
}

// stopJobs stops r's decorated jobs, each freeing its lease if it leads.
func (w *world) stopJobs(r *replica) {
	w.t.Helper()
	if r.stopped {
		return
	}
	r.stopped = true
	ctx := context.Background()
	for _, j := range r.jobs {
		if err := j.Stop(ctx); err != nil && !r.store.Crashed() {
			w.t.Errorf("stop a job of %s: %v", r.holder, err)
		}
	}
}

// crash makes every store call of r fail from now on, leaving its jobs as
// they are (they stop when their terms run out of trust), and counts its
// inner jobs as dead from now on in the time without a leader.
func (w *world) crash(r *replica) {
	r.store.Crash()
	w.led.crash(r.id)
}

// shutdown stops every replica still running, so that nothing outlives the
// bubble.
func (w *world) shutdown() {
	ctx := context.Background()
	for _, r := range w.reps {
		w.stopJobs(r)
		_ = r.m.close(ctx) // a crashed replica's fails: its store is gone
	}
}

// simJob is a fake job that records its starts and stops in the ledger.
type simJob struct {
	led        *ledger
	lease, rep int
}

func (j *simJob) Start(context.Context) error { j.led.started(j.lease, j.rep); return nil }
func (j *simJob) Stop(context.Context) error  { j.led.stopped(j.lease, j.rep); return nil }

// ledger records, in the bubble's time, when each replica's inner job of
// each lease started and stopped.
type ledger struct {
	mu       sync.Mutex
	events   []simEvent
	runs     []map[int]bool // per lease, the replicas whose inner job runs now
	overlaps int            // starts while another inner job of the lease ran
	crashed  map[int]time.Time
	reps     int
}

type simEvent struct {
	at         time.Time
	lease, rep int
	start      bool
}

func (l *ledger) init(leases int) {
	l.runs = make([]map[int]bool, leases)
	for i := range l.runs {
		l.runs[i] = map[int]bool{}
	}
	l.crashed = map[int]time.Time{}
}

func (l *ledger) addReplica() {
	l.mu.Lock()
	l.reps++
	l.mu.Unlock()
}

func (l *ledger) started(lease, rep int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.runs[lease]) > 0 {
		l.overlaps++
	}
	l.runs[lease][rep] = true
	l.events = append(l.events, simEvent{at: time.Now(), lease: lease, rep: rep, start: true})
}

func (l *ledger) stopped(lease, rep int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.runs[lease], rep)
	l.events = append(l.events, simEvent{at: time.Now(), lease: lease, rep: rep})
}

func (l *ledger) crash(rep int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.crashed[rep] = time.Now()
}

// outcome is what one run measured, from its t0 (the start of the
// scenario's action) to its end.
type outcome struct {
	maxShare int           // most leases one live replica leads at the end
	handoffs int           // starts of a lease on another replica than its last
	gapTotal time.Duration // summed over leases: time with no live inner job, after the lease's first leader
	gapMax   time.Duration // the longest such stretch of one lease
	overlaps int           // starts while another inner job of the lease ran (always counted, from the beginning)
	// recover is, for the leases the replica the scenario acts on led at
	// t0, the longest time from t0 to their first start elsewhere (drain;
	// for a crash from the crashed replica's last write of the lease).
	recover time.Duration
}

// measure computes the outcome from t0 to now. acted, if not -1, is the
// replica whose leases recover follows; fromWrite gives, for a crash, the
// start of its last write of a lease.
func (l *ledger) measure(t0 time.Time, acted int, fromWrite func(lease string) time.Time, names []string) outcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	end := time.Now()
	var out outcome
	out.overlaps = l.overlaps
	n := len(l.runs)
	live := make([]map[int]bool, n) // per lease, the live replicas running its job
	for i := range live {
		live[i] = map[int]bool{}
	}
	last := make([]int, n) // the replica that last started each lease
	for i := range last {
		last[i] = -1
	}
	ledSince := make([]time.Time, n) // the start of the lease's current gap, if in one
	everLed := make([]bool, n)
	pending := make([]bool, n) // led by acted at t0, not yet started elsewhere
	measuring := false
	crashes := l.crashedOrder()
	gap := func(i int, from, to time.Time) {
		if from.Before(t0) {
			from = t0
		}
		if d := to.Sub(from); d > 0 {
			out.gapTotal += d
			out.gapMax = max(out.gapMax, d)
		}
	}
	leave := func(i, rep int, at time.Time) {
		if !live[i][rep] {
			return
		}
		delete(live[i], rep)
		if len(live[i]) == 0 {
			ledSince[i] = at
		}
	}
	begin := func() {
		measuring = true
		for i := range n {
			if acted >= 0 && live[i][acted] {
				pending[i] = true
			}
		}
	}
	for _, ev := range l.events {
		for len(crashes) > 0 && !crashes[0].at.After(ev.at) {
			c := crashes[0]
			crashes = crashes[1:]
			if !measuring && !c.at.Before(t0) {
				begin()
			}
			for i := range n {
				leave(i, c.rep, c.at)
			}
		}
		if !measuring && !ev.at.Before(t0) {
			begin()
		}
		i := ev.lease
		if !ev.start {
			leave(i, ev.rep, ev.at)
			continue
		}
		if _, dead := l.crashed[ev.rep]; dead && !ev.at.Before(l.crashed[ev.rep]) {
			continue
		}
		if measuring && last[i] >= 0 && last[i] != ev.rep {
			out.handoffs++
		}
		last[i] = ev.rep
		if len(live[i]) == 0 && everLed[i] {
			gap(i, ledSince[i], ev.at)
		}
		everLed[i] = true
		live[i][ev.rep] = true
		if pending[i] && ev.rep != acted {
			pending[i] = false
			from := t0
			if fromWrite != nil {
				from = fromWrite(names[i])
			}
			out.recover = max(out.recover, ev.at.Sub(from))
		}
	}
	if !measuring {
		begin()
	}
	for _, c := range crashes {
		for i := range n {
			leave(i, c.rep, c.at)
		}
	}
	share := make([]int, l.reps)
	for i := range n {
		if len(live[i]) == 0 && everLed[i] {
			gap(i, ledSince[i], end)
		}
		for rep := range live[i] {
			share[rep]++
		}
		if pending[i] {
			out.recover = max(out.recover, end.Sub(t0)+time.Hour) // never recovered: past any bound
		}
	}
	for _, s := range share {
		out.maxShare = max(out.maxShare, s)
	}
	return out
}

type crashAt struct {
	rep int
	at  time.Time
}

// crashedOrder returns the crashes in time order. l.mu is held.
func (l *ledger) crashedOrder() []crashAt {
	var cs []crashAt
	for rep, at := range l.crashed {
		cs = append(cs, crashAt{rep, at})
	}
	slices.SortFunc(cs, func(a, b crashAt) int { return a.at.Compare(b.at) })
	return cs
}
