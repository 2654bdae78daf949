package peers_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/leaderaware/leaderaware/elector"
)

const leaseName = "bench-job"

// timings is one lease configuration that both implementations get.
type timings struct {
	name          string
	ttl           time.Duration // leaderaware TTL; client-go LeaseDuration
	renewDeadline time.Duration // client-go RenewDeadline (leaderaware derives its own trust window)
	renewEvery    time.Duration // leaderaware RenewInterval; a client-go leader renews every RetryPeriod
	retryEvery    time.Duration // leaderaware RetryInterval; client-go RetryPeriod
}

var (
	// ttl1500ms is the configuration of the root module's BenchmarkFailover.
	// A Lease object keeps its duration in whole seconds, so client-go
	// writes 1.5s as 1s, and the other candidates count from that (see
	// BenchmarkCrashFailover).
	ttl1500ms = timings{name: "1.5s", ttl: 1500 * time.Millisecond, renewDeadline: time.Second,
		renewEvery: 500 * time.Millisecond, retryEvery: 500 * time.Millisecond}
	// ttl2s is the short configuration: a TTL client-go can store as is.
	ttl2s = timings{name: "2s", ttl: 2 * time.Second, renewDeadline: time.Second,
		renewEvery: 500 * time.Millisecond, retryEvery: 500 * time.Millisecond}
	// ttl15s is each library's default: leaderaware's zero Config (TTL 15s,
	// RenewInterval TTL/3, RetryInterval 2s) and the 15s/10s/2s of client-go's
	// documentation and of kube-controller-manager.
	ttl15s = timings{name: "15s", ttl: 15 * time.Second, renewDeadline: 10 * time.Second,
		renewEvery: 5 * time.Second, retryEvery: 2 * time.Second}
)

// waitLimit bounds every wait for an election under tm, so that a broken run
// fails instead of hanging.
func (tm timings) waitLimit() time.Duration { return 2*tm.ttl + 10*time.Second }

// impl is one implementation under comparison.
type impl struct {
	name string
	// newWorld returns one store (or API server) on which candidates of this
	// implementation compete. releaseOnCancel matters to client-go only.
	newWorld func(tm timings, releaseOnCancel bool) world
}

// world starts candidates for one lease in one store.
type world interface {
	// start launches a candidate that campaigns on its own goroutine and,
	// once it leads, holds leadership until it steps down, fails, loses it
	// or is stopped.
	start(id string) (candidate, error)
}

// candidate is one running participant of an election.
type candidate interface {
	elected() <-chan struct{} // closed when it leads
	electedAt() time.Time     // when its job started; valid once elected is closed
	demoted() <-chan struct{} // closed when its leadership ended, as its job sees it
	demotedAt() time.Time     // valid once demoted is closed
	waits() int64             // reads that found the lease held by another, so far
	stepDown()                // the graceful way to give up leadership; it has to lead
	// fail makes every store or API call of the candidate fail (crashed) or
	// hang until its context ends (frozen) from now on. It returns the start
	// of the candidate's last successful write (acquire or renewal) and the
	// moment of the fault.
	fail(m faultMode) (lastWrite, at time.Time)
	stop() // ends the candidate and waits for every goroutine it started
}

var (
	leaderaware        = impl{name: "leaderaware", newWorld: newOurWorld(false)}
	leaderawarePolling = impl{name: "leaderaware-polling", newWorld: newOurWorld(true)}
	clientGo           = impl{name: "client-go", newWorld: newKubeWorld}
)

// rounds is the number of scenarios one benchmark iteration runs, at once:
// each in a world of its own (its own store or clientset), so they share only
// the CPU, which they hardly use (they wait on timers). Running them
// together makes five samples cost the wall time of one.
const rounds = 5

// sample is the outcome of one scenario.
type sample struct {
	// took is the time from the step-down, crash or freeze to the moment the
	// new leader's job started.
	took time.Duration
	// fromRenewal is the time from the start of the old leader's last
	// successful write (its acquire or last renewal) to the new leader's
	// start (crash and freeze only).
	fromRenewal time.Duration
	// overlap is how long the old leader's job still ran after the new
	// leader's had started: two leaders at once.
	overlap time.Duration
}

// scenario runs one election scenario; ph in [0, 1) places its event within
// a cycle of the leader or follower.
type scenario func(im impl, tm timings, ph float64) (sample, error)

// BenchmarkHandoff measures a graceful handoff: the leader steps down
// (leaderaware: Term.Resign; client-go: cancel the leader's context, with
// ReleaseOnCancel) and the figure is the wall time until the other candidate's
// job starts (median ms/handoff and max-ms/handoff over the rounds).
// leaderaware-polling is leaderaware on a store whose Notifier is
// hidden, so the waiting candidate only polls, as every client-go candidate
// does.
func BenchmarkHandoff(b *testing.B) {
	for _, tm := range []timings{ttl2s, ttl15s} {
		b.Run("ttl="+tm.name, func(b *testing.B) {
			for _, im := range []impl{leaderaware, leaderawarePolling, clientGo} {
				b.Run("impl="+im.name, func(b *testing.B) {
					s := runRounds(b, im, tm, handoff)
					report(b, s, func(x sample) time.Duration { return x.took }, "handoff")
				})
			}
		})
	}
}

// BenchmarkCrashFailover measures failover after a crash: from one instant on
// every store or API call of the leader fails, as if its process had been
// killed or cut off from the store. The other candidate was already waiting.
// Figures, median and max over the rounds: from the crash until the new
// leader's job starts (ms/failover), and from the start of the old leader's
// last successful write (ms/from-renewal; leaderaware promises at most
// TTL + RetryInterval); and the longest time the old leader's job still ran
// after the new one had started (max-ms/overlap: two leaders at once; a
// leader that cannot reach its store cannot be told, so only its own clock can
// stop it in time).
//
// client-go stores a lease duration in whole seconds (truncated), so at 1.5s
// its candidates wait 1s; 2s and 15s (both libraries' default) it can
// represent.
func BenchmarkCrashFailover(b *testing.B) {
	for _, tm := range []timings{ttl1500ms, ttl2s, ttl15s} {
		b.Run("ttl="+tm.name, func(b *testing.B) {
			for _, im := range []impl{leaderaware, clientGo} {
				b.Run("impl="+im.name, func(b *testing.B) {
					s := runRounds(b, im, tm, faulted(crashed))
					report(b, s, func(x sample) time.Duration { return x.took }, "failover")
					report(b, s, func(x sample) time.Duration { return x.fromRenewal }, "from-renewal")
					b.ReportMetric(ms(maxOf(s, func(x sample) time.Duration { return x.overlap })), "max-ms/overlap")
					if im.name == leaderaware.name {
						checkSafe(b, tm, s)
					}
				})
			}
		})
	}
}

// BenchmarkFrozenLeader measures takeover from a leader that stops renewing
// without dying, like a process under SIGSTOP or behind a network that drops
// its packets: from one instant on every store or API call of the leader
// hangs until its context ends. The leader's job keeps running until the
// leader's own clock ends its term. Figures, over the rounds: from the freeze
// until the new leader's job starts (ms/takeover, max-ms/takeover); from the
// start of the old leader's last successful write (min-ms/from-renewal must
// be at least the TTL: nobody takes over before the lease has gone unrenewed
// for a whole TTL, max-ms/from-renewal); and max-ms/overlap, which must be 0:
// the new leader never starts before the old one's trust window closed.
// The benchmark fails if leaderaware breaks either bound.
func BenchmarkFrozenLeader(b *testing.B) {
	for _, tm := range []timings{ttl2s, ttl15s} {
		b.Run("ttl="+tm.name, func(b *testing.B) {
			for _, im := range []impl{leaderaware, clientGo} {
				b.Run("impl="+im.name, func(b *testing.B) {
					s := runRounds(b, im, tm, faulted(frozen))
					report(b, s, func(x sample) time.Duration { return x.took }, "takeover")
					fromRenewal := func(x sample) time.Duration { return x.fromRenewal }
					b.ReportMetric(ms(minOf(s, fromRenewal)), "min-ms/from-renewal")
					b.ReportMetric(ms(maxOf(s, fromRenewal)), "max-ms/from-renewal")
					b.ReportMetric(ms(maxOf(s, func(x sample) time.Duration { return x.overlap })), "max-ms/overlap")
					if im.name == leaderaware.name {
						checkSafe(b, tm, s)
					}
				})
			}
		})
	}
}

// BenchmarkGoroutines counts the goroutines of running candidates while one
// leads and one waits: runtime.NumGoroutine after minus before, divided by
// two (goroutines/elector), and split by role. Both libraries block the caller
// (Campaign, Run), so each candidate runs on one goroutine of its own, which
// is counted. The leader's job is a wait for the end of leadership: on the
// goroutine that called Campaign for leaderaware, in the OnStartedLeading
// goroutine that client-go starts.
func BenchmarkGoroutines(b *testing.B) {
	for _, im := range []impl{leaderaware, clientGo} {
		b.Run("impl="+im.name, func(b *testing.B) {
			var leader, follower, n int
			for b.Loop() {
				l, f := goroutines(b, im)
				leader += l
				follower += f
				n++
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(leader+follower)/2/float64(n), "goroutines/elector")
			b.ReportMetric(float64(leader)/float64(n), "goroutines/leader")
			b.ReportMetric(float64(follower)/float64(n), "goroutines/follower")
		})
	}
}

// TestScenarios runs each scenario once per implementation at the short TTL,
// with loose bounds on time and strict ones on leaderaware's safety, so that
// `go test ./...` here catches a broken benchmark in a few seconds.
func TestScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time scenarios take seconds")
	}
	tm := ttl2s
	limit := tm.ttl + 2*tm.retryEvery + time.Second
	for _, im := range []impl{leaderaware, leaderawarePolling, clientGo} {
		t.Run(im.name, func(t *testing.T) {
			t.Parallel()
			s, err := handoff(im, tm, 0.5)
			if err != nil {
				t.Fatal(err)
			}
			if s.took > 2*tm.retryEvery+time.Second {
				t.Errorf("handoff took %v", s.took)
			}
			if im.name == leaderawarePolling.name {
				return // crash and freeze do not depend on release notifications
			}
			for _, m := range []faultMode{crashed, frozen} {
				s, err := faulted(m)(im, tm, 0.5)
				if err != nil {
					t.Fatal(err)
				}
				if s.fromRenewal > limit {
					t.Errorf("%v: new leader %v after the last renewal, want at most %v", m, s.fromRenewal, limit)
				}
				if im.name == leaderaware.name {
					checkSafe(t, tm, []sample{s})
				}
			}
		})
	}
}

// TestGoroutines checks that each candidate runs on at least one goroutine
// and that BenchmarkGoroutines' counting works.
func TestGoroutines(t *testing.T) {
	for _, im := range []impl{leaderaware, clientGo} {
		if l, f := goroutines(t, im); l < 1 || f < 1 {
			t.Errorf("%s: goroutines: leader %d, follower %d; want at least 1 each", im.name, l, f)
		}
	}
}

// runRounds runs sc, rounds at a time, once per b.Loop iteration, and
// returns every sample. Iterations take seconds of real time: the default
// -benchtime runs one; -benchtime=Nx runs N. ns/op is suppressed: it would
// be the length of the slowest round.
func runRounds(b *testing.B, im impl, tm timings, sc scenario) []sample {
	if testing.Short() && tm.ttl > ttl2s.ttl {
		b.Skipf("ttl %v: takes tens of seconds", tm.ttl)
	}
	var all []sample
	for i := 0; b.Loop(); i++ {
		got := make([]sample, rounds)
		errs := make([]error, rounds)
		var wg sync.WaitGroup
		for r := range rounds {
			ph := phase(i*rounds + r)
			wg.Go(func() { got[r], errs[r] = sc(im, tm, ph) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			b.Fatal(err)
		}
		all = append(all, got...)
	}
	b.ReportMetric(0, "ns/op")
	return all
}

// report reports the median and the largest of f over s, in ms, as
// ms/what and max-ms/what.
func report(b *testing.B, s []sample, f func(sample) time.Duration, what string) {
	ds := make([]time.Duration, len(s))
	for i, x := range s {
		ds[i] = f(x)
	}
	slices.Sort(ds)
	b.ReportMetric(ms(ds[len(ds)/2]), "ms/"+what)
	b.ReportMetric(ms(ds[len(ds)-1]), "max-ms/"+what)
}

func maxOf(s []sample, f func(sample) time.Duration) time.Duration {
	m := f(s[0])
	for _, x := range s[1:] {
		m = max(m, f(x))
	}
	return m
}

func minOf(s []sample, f func(sample) time.Duration) time.Duration {
	m := f(s[0])
	for _, x := range s[1:] {
		m = min(m, f(x))
	}
	return m
}

// checkSafe fails tb if a leaderaware sample broke the elapsed-time model:
// the new leader started before the lease had gone unrenewed for the whole
// TTL, or while the old leader's job still ran.
func checkSafe(tb testing.TB, tm timings, s []sample) {
	tb.Helper()
	for _, x := range s {
		if x.fromRenewal < tm.ttl {
			tb.Errorf("new leader started %v after the old leader's last renewal, before the TTL %v", x.fromRenewal, tm.ttl)
		}
		if x.overlap > 0 {
			tb.Errorf("the old leader's job still ran %v after the new leader's started", x.overlap)
		}
	}
}

// handoff runs one graceful handoff and returns the time from the leader's
// step-down until the other candidate leads. ph sets when, within one
// RetryInterval after the follower first found the lease held, the leader
// steps down.
func handoff(im impl, tm timings, ph float64) (sample, error) {
	var cs candidates
	defer cs.stop()
	a, b, err := cs.leaderAndFollower(im.newWorld(tm, true), tm)
	if err != nil {
		return sample{}, err
	}
	time.Sleep(time.Duration(ph * float64(tm.retryEvery)))

	t0 := time.Now()
	a.stepDown()
	if err := waitClosed(b.elected(), tm, "b leads after a stepped down"); err != nil {
		return sample{}, err
	}
	return sample{took: b.electedAt().Sub(t0)}, nil
}

// faulted returns the scenario in which the leader crashes or freezes while
// the other candidate waits. ph places the fault within a renewal cycle,
// after the leader's first renewal.
func faulted(m faultMode) scenario {
	return func(im impl, tm timings, ph float64) (sample, error) {
		var cs candidates
		defer cs.stop()
		a, b, err := cs.leaderAndFollower(im.newWorld(tm, false), tm)
		if err != nil {
			return sample{}, err
		}
		// The leader has renewed at least once since b started waiting, so b
		// has to see a renewal to learn of it; the fault lands at ph of a
		// renewal cycle after that.
		time.Sleep(tm.renewEvery + time.Duration(ph*float64(tm.renewEvery)))

		lastWrite, at := a.fail(m)
		if err := waitClosed(b.elected(), tm, fmt.Sprintf("b leads after a %v", m)); err != nil {
			return sample{}, err
		}
		if err := waitClosed(a.demoted(), tm, fmt.Sprintf("a's leadership ends after it %v", m)); err != nil {
			return sample{}, err
		}
		return sample{
			took:        b.electedAt().Sub(at),
			fromRenewal: b.electedAt().Sub(lastWrite),
			overlap:     max(0, a.demotedAt().Sub(b.electedAt())),
		}, nil
	}
}

// goroutines returns the goroutines added by a leading candidate, and then by
// a second, waiting candidate.
func goroutines(tb testing.TB, im impl) (leader, follower int) {
	tb.Helper()
	var cs candidates
	defer cs.stop()
	tm := ttl2s
	w := im.newWorld(tm, true)
	settle := func() int {
		time.Sleep(50 * time.Millisecond) // let goroutines that are on their way out exit
		return runtime.NumGoroutine()
	}
	base := settle()
	a, err := cs.start(w, "candidate-a")
	if err != nil {
		tb.Fatal(err)
	}
	if err := waitClosed(a.elected(), tm, "a leads"); err != nil {
		tb.Fatal(err)
	}
	withLeader := settle()
	b, err := cs.start(w, "candidate-b")
	if err != nil {
		tb.Fatal(err)
	}
	if err := waitWaiting(b, tm); err != nil {
		tb.Fatal(err)
	}
	withBoth := settle()
	select {
	case <-b.elected():
		tb.Fatal("b leads while a should")
	default:
	}
	return withLeader - base, withBoth - withLeader
}

// phase returns the i-th number of an evenly spread sequence in [0, 1)
// (golden-ratio steps), so that rounds sample different moments of a cycle
// and both implementations sample the same ones.
func phase(i int) float64 { return math.Mod(float64(i+1)*0.6180339887498949, 1) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// candidates stops, in reverse order, every candidate it started.
type candidates []candidate

func (cs *candidates) start(w world, id string) (candidate, error) {
	c, err := w.start(id)
	if err != nil {
		return nil, err
	}
	*cs = append(*cs, c)
	return c, nil
}

// leaderAndFollower starts candidate a, waits until it leads, then starts
// candidate b and waits until b has found the lease held: b is waiting
// before anything happens to a.
func (cs *candidates) leaderAndFollower(w world, tm timings) (a, b candidate, err error) {
	if a, err = cs.start(w, "candidate-a"); err != nil {
		return nil, nil, err
	}
	if err = waitClosed(a.elected(), tm, "a leads"); err != nil {
		return nil, nil, err
	}
	if b, err = cs.start(w, "candidate-b"); err != nil {
		return nil, nil, err
	}
	if err = waitWaiting(b, tm); err != nil {
		return nil, nil, err
	}
	return a, b, nil
}

// stop has a pointer receiver so that `defer cs.stop()` sees the candidates
// started after the defer statement.
func (cs *candidates) stop() {
	for i := len(*cs) - 1; i >= 0; i-- {
		(*cs)[i].stop()
	}
}

func waitClosed(ch <-chan struct{}, tm timings, what string) error {
	select {
	case <-ch:
		return nil
	case <-time.After(tm.waitLimit()):
		return fmt.Errorf("ttl %v: timed out after %v waiting until %s", tm.ttl, tm.waitLimit(), what)
	}
}

// waitWaiting waits until c has found the lease held by another candidate.
func waitWaiting(c candidate, tm timings) error {
	deadline := time.Now().Add(tm.waitLimit())
	for c.waits() == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("ttl %v: timed out after %v waiting for a candidate to find the lease held", tm.ttl, tm.waitLimit())
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// marks records when a candidate started and stopped leading. Each mark is
// set once, by one goroutine, before its channel is closed.
type marks struct {
	electedCh, demotedCh chan struct{}
	electedT, demotedT   time.Time
}

func newMarks() marks {
	return marks{electedCh: make(chan struct{}), demotedCh: make(chan struct{})}
}

func (m *marks) markElected() { m.electedT = time.Now(); close(m.electedCh) }
func (m *marks) markDemoted() { m.demotedT = time.Now(); close(m.demotedCh) }

func (m *marks) elected() <-chan struct{} { return m.electedCh }
func (m *marks) electedAt() time.Time     { return m.electedT }
func (m *marks) demoted() <-chan struct{} { return m.demotedCh }
func (m *marks) demotedAt() time.Time     { return m.demotedT }

// faultMode is what has happened to a candidate's connection to its store.
type faultMode int32

const (
	healthy faultMode = iota
	crashed           // every call fails at once
	frozen            // every call hangs until its context ends
)

func (m faultMode) String() string {
	switch m {
	case crashed:
		return "crashed"
	case frozen:
		return "froze"
	}
	return "healthy"
}

var (
	errCrashed = errors.New("candidate crashed: store unreachable")
	errThawed  = errors.New("candidate stopped while frozen")
)

// faults injects a crash or a freeze into one candidate's store calls and
// remembers when its last successful write started.
type faults struct {
	mu        sync.Mutex // held across each write, so that a fault lands between writes
	mode      faultMode
	lastWrite time.Time
	thawed    chan struct{} // closed by thaw: hanging calls return
	thawOnce  sync.Once
}

func newFaults() *faults { return &faults{thawed: make(chan struct{})} }

// read returns the error a read fails with, after hanging if frozen, or nil.
func (f *faults) read(ctx context.Context) error {
	f.mu.Lock()
	m := f.mode
	f.mu.Unlock()
	return f.fault(ctx, m)
}

// write runs op unless a fault was injected, and records the start of each
// successful write.
func (f *faults) write(ctx context.Context, op func() error) error {
	f.mu.Lock()
	if m := f.mode; m != healthy {
		f.mu.Unlock()
		return f.fault(ctx, m)
	}
	defer f.mu.Unlock()
	start := time.Now()
	err := op()
	if err == nil {
		f.lastWrite = start
	}
	return err
}

func (f *faults) fault(ctx context.Context, m faultMode) error {
	switch m {
	case crashed:
		return errCrashed
	case frozen:
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-f.thawed:
			return errThawed
		}
	}
	return nil
}

// inject sets m once the write in flight, if any, has returned, and returns
// the start of the last successful write and the moment of the fault.
func (f *faults) inject(m faultMode) (lastWrite, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode = m
	return f.lastWrite, time.Now()
}

// thaw ends every hanging call, so that a frozen candidate can be stopped.
func (f *faults) thaw() { f.thawOnce.Do(func() { close(f.thawed) }) }

// ---- leaderaware ----

// ourWorld is one elector.MemoryStore.
type ourWorld struct {
	mem  *elector.MemoryStore
	poll bool // hide the store's Notifier from candidates
	tm   timings
}

func newOurWorld(poll bool) func(timings, bool) world {
	return func(tm timings, _ bool) world {
		return &ourWorld{mem: elector.NewMemoryStore(), poll: poll, tm: tm}
	}
}

// faultyStore forwards to a Store through faults and counts acquires that
// found the lease held. Embedding elector.Store hides the inner store's
// Notifier; see watchingStore.
type faultyStore struct {
	elector.Store
	*faults
	held atomic.Int64
}

func (s *faultyStore) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	var l elector.Lease
	err := s.write(ctx, func() (err error) {
		l, err = s.Store.TryAcquire(ctx, name, holder, ttl, observed)
		return err
	})
	if errors.Is(err, elector.ErrHeld) {
		s.held.Add(1)
	}
	return l, err
}

func (s *faultyStore) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	var n elector.Lease
	err := s.write(ctx, func() (err error) {
		n, err = s.Store.Renew(ctx, l, ttl)
		return err
	})
	return n, err
}

func (s *faultyStore) Release(ctx context.Context, l elector.Lease) error {
	if err := s.read(ctx); err != nil {
		return err
	}
	return s.Store.Release(ctx, l)
}

func (s *faultyStore) Get(ctx context.Context, name string) (elector.Lease, error) {
	if err := s.read(ctx); err != nil {
		return elector.Lease{}, err
	}
	return s.Store.Get(ctx, name)
}

// watchingStore is a faultyStore that passes on the inner store's
// Notifier.
type watchingStore struct {
	*faultyStore
	elector.Notifier
}

func (w *ourWorld) start(id string) (candidate, error) {
	fs := &faultyStore{Store: w.mem, faults: newFaults()}
	var s elector.Store = fs
	if !w.poll {
		s = watchingStore{faultyStore: fs, Notifier: w.mem}
	}
	e, err := elector.New(s, leaseName, elector.Config{
		TTL:           w.tm.ttl,
		RenewInterval: w.tm.renewEvery,
		RetryInterval: w.tm.retryEvery,
		Holder:        id,
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &ourCandidate{marks: newMarks(), store: fs, cancel: cancel, exited: make(chan struct{})}
	go c.run(ctx, e)
	return c, nil
}

// ourCandidate campaigns once on its own goroutine and, once elected, waits
// (its "job") until the term ends or it is stopped, then resigns.
type ourCandidate struct {
	marks
	store  *faultyStore
	term   elector.Term // set before elected is closed
	cancel context.CancelFunc
	exited chan struct{}
}

func (c *ourCandidate) run(ctx context.Context, e *elector.LeaseElector) {
	defer close(c.exited)
	term, err := e.Campaign(ctx)
	if err != nil {
		return // stopped before it led
	}
	c.term = term
	c.markElected()
	select {
	case <-term.Done():
	case <-ctx.Done():
	}
	c.markDemoted()
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = term.Resign(rctx) // after a fault the store is unreachable: an error is expected
}

func (c *ourCandidate) waits() int64 { return c.store.held.Load() }

func (c *ourCandidate) fail(m faultMode) (lastWrite, at time.Time) { return c.store.inject(m) }

func (c *ourCandidate) stepDown() {
	// The candidate's goroutine sees Done and resigns too; the second Resign
	// returns nil.
	_ = c.term.Resign(context.Background())
}

func (c *ourCandidate) stop() {
	c.store.thaw()
	c.cancel()
	<-c.exited
}

// ---- client-go ----

// kubeWorld is one fake clientset: an in-memory object tracker standing in
// for the API server. Every candidate gets its own LeaseLock on it, as
// separate processes would.
type kubeWorld struct {
	cs              *fake.Clientset
	tm              timings
	releaseOnCancel bool
}

func newKubeWorld(tm timings, releaseOnCancel bool) world {
	return &kubeWorld{cs: fake.NewSimpleClientset(), tm: tm, releaseOnCancel: releaseOnCancel}
}

// faultyLock forwards to a resourcelock.Interface through faults and counts
// successful reads of a record held by another candidate. It also tells the
// candidate, synchronously, when client-go is about to start
// OnStartedLeading.
type faultyLock struct {
	resourcelock.Interface
	*faults
	held      atomic.Int64
	onElected func()
}

func (l *faultyLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	if err := l.read(ctx); err != nil {
		return nil, nil, err
	}
	r, raw, err := l.Interface.Get(ctx)
	if err == nil && r.HolderIdentity != "" && r.HolderIdentity != l.Identity() {
		l.held.Add(1)
	}
	return r, raw, err
}

func (l *faultyLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, func() error { return l.Interface.Create(ctx, ler) })
}

func (l *faultyLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, func() error { return l.Interface.Update(ctx, ler) })
}

// RecordEvent is called by LeaderElector.acquire with "became leader" on the
// Run goroutine just before it starts OnStartedLeading with `go`. Counting
// the callback there, not inside it, lets stop wait for it without a race.
func (l *faultyLock) RecordEvent(s string) {
	if s == "became leader" {
		l.onElected()
	}
	l.Interface.RecordEvent(s)
}

func (w *kubeWorld) start(id string) (candidate, error) {
	c := &kubeCandidate{marks: newMarks(), exited: make(chan struct{})}
	c.lock = &faultyLock{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: "default", Name: leaseName},
			Client:     w.cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		},
		faults:    newFaults(),
		onElected: func() { c.callbacks.Add(1) },
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            c.lock,
		Name:            leaseName,
		LeaseDuration:   w.tm.ttl,
		RenewDeadline:   w.tm.renewDeadline,
		RetryPeriod:     w.tm.retryEvery,
		ReleaseOnCancel: w.releaseOnCancel,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				defer c.callbacks.Done()
				c.markElected()
				<-ctx.Done() // the job runs until leadership ends
				c.markDemoted()
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.exited)
		le.Run(ctx)
	}()
	return c, nil
}

// kubeCandidate runs LeaderElector.Run on its own goroutine; client-go runs
// OnStartedLeading on another one, which callbacks counts.
type kubeCandidate struct {
	marks
	lock      *faultyLock
	cancel    context.CancelFunc
	exited    chan struct{}
	callbacks sync.WaitGroup
}

func (c *kubeCandidate) waits() int64 { return c.lock.held.Load() }

func (c *kubeCandidate) fail(m faultMode) (lastWrite, at time.Time) { return c.lock.inject(m) }

// stepDown cancels Run's context; with ReleaseOnCancel, client-go then
// releases the lease (it writes an empty holder with a 1s duration).
func (c *kubeCandidate) stepDown() { c.cancel() }

func (c *kubeCandidate) stop() {
	c.lock.thaw()
	c.cancel()
	<-c.exited
	c.callbacks.Wait()
}
