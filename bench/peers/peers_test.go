package peers_test

import (
	"context"
	"errors"
	"math"
	"runtime"
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

// timings is the one lease configuration that both implementations get.
type timings struct {
	name          string
	ttl           time.Duration // leaderaware TTL; client-go LeaseDuration
	renewDeadline time.Duration // client-go RenewDeadline (leaderaware derives its own trust window)
	renewEvery    time.Duration // leaderaware RenewInterval; a client-go leader renews every RetryPeriod
	retryEvery    time.Duration // leaderaware RetryInterval; client-go RetryPeriod
}

var (
	// standard is the configuration of every benchmark.
	standard = timings{name: "1.5s", ttl: 1500 * time.Millisecond, renewDeadline: time.Second,
		renewEvery: 500 * time.Millisecond, retryEvery: 500 * time.Millisecond}
	// wholeSecond is standard with a TTL client-go can store as is: a Lease
	// object keeps its duration in whole seconds, so client-go writes 1.5s as
	// 1s, and the other candidates count from that (see BenchmarkCrashFailover).
	wholeSecond = timings{name: "2s", ttl: 2 * time.Second, renewDeadline: time.Second,
		renewEvery: 500 * time.Millisecond, retryEvery: 500 * time.Millisecond}
)

// waitLimit bounds every wait for an election, so a broken run fails
// instead of hanging.
const waitLimit = 15 * time.Second

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
	// once it leads, holds leadership until it steps down, crashes, loses it
	// or is stopped.
	start(tb testing.TB, id string) candidate
}

// candidate is one running participant of an election.
type candidate interface {
	elected() <-chan struct{} // closed when it leads
	electedAt() time.Time     // when it learned it leads; valid once elected is closed
	demoted() <-chan struct{} // closed when its leadership ended, as its job sees it
	demotedAt() time.Time     // valid once demoted is closed
	attempts() int64          // acquire attempts (leaderaware) or lock reads (client-go) so far
	stepDown()                // the graceful way to give up leadership; it has to lead
	crash()                   // every store or API call of the candidate fails from now on
	stop()                    // ends the candidate and waits for every goroutine it started
}

var (
	leaderaware        = impl{name: "leaderaware", newWorld: newOurWorld(false)}
	leaderawarePolling = impl{name: "leaderaware-polling", newWorld: newOurWorld(true)}
	clientGo           = impl{name: "client-go", newWorld: newKubeWorld}
)

// BenchmarkHandoff measures a graceful handoff: the leader steps down
// (leaderaware: Term.Resign; client-go: cancel the leader's context, with
// ReleaseOnCancel) and the figure is the wall time until the other candidate
// leads. leaderaware-polling is leaderaware on a store whose ReleaseWatcher is
// hidden, so the waiting candidate only polls, as every client-go candidate does.
func BenchmarkHandoff(b *testing.B) {
	for _, im := range []impl{leaderaware, leaderawarePolling, clientGo} {
		b.Run("impl="+im.name, func(b *testing.B) {
			var total time.Duration
			for i := range b.N {
				total += handoff(b, im, standard, phase(i))
			}
			b.ReportMetric(0, "ns/op") // an iteration includes setup and settling; see the metrics
			b.ReportMetric(ms(total)/float64(b.N), "ms/handoff")
		})
	}
}

// BenchmarkCrashFailover measures failover after a crash: from one instant on
// every store or API call of the leader fails, as if its process had been
// killed or cut off from the store. The figures are the wall time from that
// instant until the other candidate leads (ms/failover), and how long the old
// leader's job still ran after the new leader's started (ms/overlap; a
// leader that cannot reach its store cannot be told, so only its own clock
// can stop it in time).
//
// ttl=1.5s is the common configuration. client-go stores a lease duration in
// whole seconds (Lease.spec.leaseDurationSeconds, truncated), so at 1.5s the
// other candidate waits 1s, not 1.5s; ttl=2s compares both at a duration
// client-go can represent.
func BenchmarkCrashFailover(b *testing.B) {
	for _, tm := range []timings{standard, wholeSecond} {
		b.Run("ttl="+tm.name, func(b *testing.B) {
			for _, im := range []impl{leaderaware, clientGo} {
				b.Run("impl="+im.name, func(b *testing.B) {
					var failover, overlap time.Duration
					for i := range b.N {
						f, o := crashFailover(b, im, tm, phase(i))
						failover += f
						overlap += o
					}
					b.ReportMetric(0, "ns/op")
					b.ReportMetric(ms(failover)/float64(b.N), "ms/failover")
					b.ReportMetric(ms(overlap)/float64(b.N), "ms/overlap")
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
			var leader, follower int
			for range b.N {
				l, f := goroutines(b, im)
				leader += l
				follower += f
			}
			n := float64(b.N)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(leader+follower)/2/n, "goroutines/elector")
			b.ReportMetric(float64(leader)/n, "goroutines/leader")
			b.ReportMetric(float64(follower)/n, "goroutines/follower")
		})
	}
}

// TestScenarios runs each scenario once per implementation with loose bounds,
// so that `go test ./...` here catches a broken benchmark.
func TestScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time scenarios take seconds")
	}
	for _, im := range []impl{leaderaware, leaderawarePolling, clientGo} {
		t.Run(im.name, func(t *testing.T) {
			if d := handoff(t, im, standard, 0.5); d > 2*standard.retryEvery+time.Second {
				t.Errorf("handoff took %v", d)
			}
			f, _ := crashFailover(t, im, standard, 0.5)
			if limit := standard.ttl + 2*standard.retryEvery + time.Second; f > limit {
				t.Errorf("failover took %v, want at most %v", f, limit)
			}
			if l, f := goroutines(t, im); l < 1 || f < 1 {
				t.Errorf("goroutines: leader %d, follower %d; want at least 1 each", l, f)
			}
		})
	}
}

// handoff runs one graceful handoff and returns the time from the leader's
// step-down until the other candidate leads. ph in [0, 1) sets when, within
// one RetryInterval after the follower's first attempt, the leader steps down.
func handoff(tb testing.TB, im impl, tm timings, ph float64) time.Duration {
	tb.Helper()
	var cs candidates
	defer cs.stop()
	w := im.newWorld(tm, true)
	a := cs.start(tb, w, "candidate-a")
	waitClosed(tb, a.elected(), "a leads")
	b := cs.start(tb, w, "candidate-b")
	waitAttempt(tb, b)
	time.Sleep(time.Duration(ph * float64(tm.retryEvery)))

	t0 := time.Now()
	a.stepDown()
	waitClosed(tb, b.elected(), "b leads after a stepped down")
	return b.electedAt().Sub(t0)
}

// crashFailover runs one crash and returns the time from the crash until the
// other candidate leads, and how long the crashed leader's job still ran
// after that. ph in [0, 1) places the crash within a renewal cycle.
func crashFailover(tb testing.TB, im impl, tm timings, ph float64) (failover, overlap time.Duration) {
	tb.Helper()
	var cs candidates
	defer cs.stop()
	w := im.newWorld(tm, false)
	a := cs.start(tb, w, "candidate-a")
	waitClosed(tb, a.elected(), "a leads")
	b := cs.start(tb, w, "candidate-b")
	waitAttempt(tb, b)
	// The leader has renewed at least once; the crash lands at ph of a cycle.
	time.Sleep(tm.renewEvery + time.Duration(ph*float64(tm.renewEvery)))

	t0 := time.Now()
	a.crash()
	waitClosed(tb, b.elected(), "b leads after a crashed")
	waitClosed(tb, a.demoted(), "a's leadership ends after its crash")
	return b.electedAt().Sub(t0), max(0, a.demotedAt().Sub(b.electedAt()))
}

// goroutines returns the goroutines added by a leading candidate, and then by
// a second, waiting candidate.
func goroutines(tb testing.TB, im impl) (leader, follower int) {
	tb.Helper()
	var cs candidates
	defer cs.stop()
	w := im.newWorld(standard, true)
	settle := func() int {
		time.Sleep(50 * time.Millisecond) // let goroutines that are on their way out exit
		return runtime.NumGoroutine()
	}
	base := settle()
	a := cs.start(tb, w, "candidate-a")
	waitClosed(tb, a.elected(), "a leads")
	withLeader := settle()
	b := cs.start(tb, w, "candidate-b")
	waitAttempt(tb, b)
	withBoth := settle()
	select {
	case <-b.elected():
		tb.Fatal("b leads while a should")
	default:
	}
	return withLeader - base, withBoth - withLeader
}

// phase returns the i-th number of an evenly spread sequence in [0, 1)
// (golden-ratio steps), so that iterations sample different moments of a
// cycle and both implementations sample the same ones.
func phase(i int) float64 { return math.Mod(float64(i+1)*0.6180339887498949, 1) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// candidates stops, in reverse order, every candidate it started.
type candidates []candidate

func (cs *candidates) start(tb testing.TB, w world, id string) candidate {
	c := w.start(tb, id)
	*cs = append(*cs, c)
	return c
}

// stop has a pointer receiver so that `defer cs.stop()` sees the candidates
// started after the defer statement.
func (cs *candidates) stop() {
	for i := len(*cs) - 1; i >= 0; i-- {
		(*cs)[i].stop()
	}
}

func waitClosed(tb testing.TB, ch <-chan struct{}, what string) {
	tb.Helper()
	select {
	case <-ch:
	case <-time.After(waitLimit):
		tb.Fatalf("timed out after %v waiting until %s", waitLimit, what)
	}
}

// waitAttempt waits until c has tried once to acquire the lease, so that it
// is really waiting when the benchmark acts.
func waitAttempt(tb testing.TB, c candidate) {
	tb.Helper()
	deadline := time.Now().Add(waitLimit)
	for c.attempts() == 0 {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for a first attempt", waitLimit)
		}
		time.Sleep(time.Millisecond)
	}
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

var errCrashed = errors.New("candidate crashed: store unreachable")

// ---- leaderaware ----

// ourWorld is one elector.MemoryStore.
type ourWorld struct {
	mem  *elector.MemoryStore
	poll bool // hide the store's ReleaseWatcher from candidates
	tm   timings
}

func newOurWorld(poll bool) func(timings, bool) world {
	return func(tm timings, _ bool) world {
		return &ourWorld{mem: elector.NewMemoryStore(), poll: poll, tm: tm}
	}
}

// faultyStore forwards to a Store and counts acquire attempts; after crash
// every call fails, as the store seen from a killed or partitioned process.
// Embedding elector.Store hides the inner store's ReleaseWatcher; see
// watchingStore.
type faultyStore struct {
	elector.Store
	crashed  atomic.Bool
	acquires atomic.Int64
}

func (s *faultyStore) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration) (elector.Lease, error) {
	s.acquires.Add(1)
	if s.crashed.Load() {
		return elector.Lease{}, errCrashed
	}
	return s.Store.TryAcquire(ctx, name, holder, ttl)
}

func (s *faultyStore) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	if s.crashed.Load() {
		return elector.Lease{}, errCrashed
	}
	return s.Store.Renew(ctx, l, ttl)
}

func (s *faultyStore) Release(ctx context.Context, l elector.Lease) error {
	if s.crashed.Load() {
		return errCrashed
	}
	return s.Store.Release(ctx, l)
}

func (s *faultyStore) Get(ctx context.Context, name string) (elector.Lease, error) {
	if s.crashed.Load() {
		return elector.Lease{}, errCrashed
	}
	return s.Store.Get(ctx, name)
}

// watchingStore is a faultyStore that passes on the inner store's
// ReleaseWatcher.
type watchingStore struct {
	*faultyStore
	elector.ReleaseWatcher
}

func (w *ourWorld) start(tb testing.TB, id string) candidate {
	tb.Helper()
	fs := &faultyStore{Store: w.mem}
	var s elector.Store = fs
	if !w.poll {
		s = watchingStore{faultyStore: fs, ReleaseWatcher: w.mem}
	}
	e, err := elector.New(s, leaseName, elector.Config{
		TTL:           w.tm.ttl,
		RenewInterval: w.tm.renewEvery,
		RetryInterval: w.tm.retryEvery,
		Holder:        id,
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &ourCandidate{marks: newMarks(), store: fs, cancel: cancel, exited: make(chan struct{})}
	go c.run(ctx, e)
	return c
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
	_ = term.Resign(rctx) // after a crash the store is unreachable: an error is expected
}

func (c *ourCandidate) attempts() int64 { return c.store.acquires.Load() }
func (c *ourCandidate) crash()          { c.store.crashed.Store(true) }

func (c *ourCandidate) stepDown() {
	// The candidate's goroutine sees Done and resigns too; the second Resign
	// returns nil.
	_ = c.term.Resign(context.Background())
}

func (c *ourCandidate) stop() {
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

// faultyLock forwards to a resourcelock.Interface and counts reads; after
// crash every API call fails. It also tells the candidate, synchronously,
// when client-go is about to start OnStartedLeading.
type faultyLock struct {
	resourcelock.Interface
	crashed   atomic.Bool
	gets      atomic.Int64
	onElected func()
}

func (l *faultyLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.gets.Add(1)
	if l.crashed.Load() {
		return nil, nil, errCrashed
	}
	return l.Interface.Get(ctx)
}

func (l *faultyLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if l.crashed.Load() {
		return errCrashed
	}
	return l.Interface.Create(ctx, ler)
}

func (l *faultyLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if l.crashed.Load() {
		return errCrashed
	}
	return l.Interface.Update(ctx, ler)
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

func (w *kubeWorld) start(tb testing.TB, id string) candidate {
	tb.Helper()
	c := &kubeCandidate{marks: newMarks(), exited: make(chan struct{})}
	c.lock = &faultyLock{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: "default", Name: leaseName},
			Client:     w.cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		},
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
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.exited)
		le.Run(ctx)
	}()
	return c
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

func (c *kubeCandidate) attempts() int64 { return c.lock.gets.Load() }
func (c *kubeCandidate) crash()          { c.lock.crashed.Store(true) }

// stepDown cancels Run's context; with ReleaseOnCancel, client-go then
// releases the lease (it writes an empty holder with a 1s duration).
func (c *kubeCandidate) stepDown() { c.cancel() }

func (c *kubeCandidate) stop() {
	c.cancel()
	<-c.exited
	c.callbacks.Wait()
}
