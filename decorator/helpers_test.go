package decorator_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/clock"
	"github.com/leaderaware/leaderaware/internal/testing/logbuf"
)

const leaseName = "job"

// Short timings for synctest bubbles.
var testConfig = elector.Config{TTL: 3 * time.Second, RenewInterval: time.Second, RetryInterval: 500 * time.Millisecond}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// countingStore wraps a MemoryStore, counts calls, records releases in an
// event log, can fail Renew or TryAcquire on demand, and forwards
// Notify and GetMany so that waiting candidates wake at once. Its electors
// read the clock it carries.
type countingStore struct {
	elector.Store
	clock.Carrier
	mem *elector.MemoryStore
	ev  *events

	acquires, renews, releases atomic.Int64
	failRenew                  atomic.Pointer[error] // Renew returns it when set
	failAcquires               atomic.Int64          // TryAcquire fails this many more times
}

var errStoreDown = fmt.Errorf("store is down")

func newCountingStore() *countingStore {
	mem := elector.NewMemoryStore()
	return &countingStore{Store: mem, mem: mem, ev: &events{}}
}

func (s *countingStore) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	s.acquires.Add(1)
	if s.failAcquires.Load() > 0 {
		s.failAcquires.Add(-1)
		return elector.Lease{}, errStoreDown
	}
	return s.Store.TryAcquire(ctx, name, holder, ttl, observed)
}

func (s *countingStore) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	s.renews.Add(1)
	if err := s.failRenew.Load(); err != nil {
		return elector.Lease{}, *err
	}
	return s.Store.Renew(ctx, l, ttl)
}

func (s *countingStore) Release(ctx context.Context, l elector.Lease) error {
	s.releases.Add(1)
	s.ev.add("release %s %d", l.Holder, l.Token) // before: a woken rival logs next
	return s.Store.Release(ctx, l)
}

func (s *countingStore) Notify(changed func(elector.Change)) func() { return s.mem.Notify(changed) }

func (s *countingStore) GetMany(ctx context.Context, names []string) ([]elector.Lease, error) {
	return s.mem.GetMany(ctx, names)
}

type counts struct{ Acquire, Renew, Release int64 }

func (s *countingStore) counts() counts {
	return counts{s.acquires.Load(), s.renews.Load(), s.releases.Load()}
}

func (c counts) sub(o counts) counts {
	return counts{c.Acquire - o.Acquire, c.Renew - o.Renew, c.Release - o.Release}
}

// events is an ordered, timestamped log shared by jobs, hooks and stores.
type events struct {
	mu    sync.Mutex
	list  []string
	times []time.Time
}

func (e *events) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, fmt.Sprintf(format, args...))
	e.times = append(e.times, time.Now())
}

func (e *events) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.list...)
}

// at returns the time of the first event named s.
func (e *events) at(t *testing.T, s string) time.Time {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, x := range e.list {
		if x == s {
			return e.times[i]
		}
	}
	t.Fatalf("no event %q in %q", s, e.list)
	return time.Time{}
}

func newElector(t *testing.T, s elector.Store, holder string) *elector.LeaseElector {
	t.Helper()
	cfg := testConfig
	cfg.Holder = holder
	e, err := elector.New(s, leaseName, cfg)
	require.NoError(t, err)
	return e
}

// fakeJob is an inner job with counters and optional behaviour.
type fakeJob struct {
	startFn, stopFn func(ctx context.Context) error
	starts, stops   atomic.Int32
}

func (j *fakeJob) Start(ctx context.Context) error {
	j.starts.Add(1)
	if j.startFn != nil {
		return j.startFn(ctx)
	}
	return nil
}

func (j *fakeJob) Stop(ctx context.Context) error {
	j.stops.Add(1)
	if j.stopFn != nil {
		return j.stopFn(ctx)
	}
	return nil
}

func (j *fakeJob) running() bool { return j.starts.Load() > j.stops.Load() }

// exclusive counts inner jobs running at once across replicas.
type exclusive struct {
	running, peak atomic.Int32
}

func (x *exclusive) enter() {
	n := x.running.Add(1)
	for {
		p := x.peak.Load()
		if n <= p || x.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (x *exclusive) leave() { x.running.Add(-1) }

// hookLog records hook calls in order.
type hookLog struct {
	ev                       events
	elected, demoted, errors atomic.Int32
	causes                   []error
	errs                     []error
	mu                       sync.Mutex
}

func (h *hookLog) hooks() decorator.Hooks {
	return decorator.Hooks{
		OnElected: func(_ context.Context, t elector.Term) {
			h.elected.Add(1)
			h.ev.add("elected %d", t.Token())
		},
		OnDemoted: func(_ context.Context, t elector.Term, cause error) {
			h.demoted.Add(1)
			h.mu.Lock()
			h.causes = append(h.causes, cause)
			h.mu.Unlock()
			h.ev.add("demoted %d", t.Token())
		},
		OnError: func(_ context.Context, err error) {
			h.errors.Add(1)
			h.mu.Lock()
			h.errs = append(h.errs, err)
			h.mu.Unlock()
			h.ev.add("error")
		},
	}
}

// fakeElector grants a term at once on every Campaign (or as campaign says).
type fakeElector struct {
	campaign func(ctx context.Context) (elector.Term, error)
	tokens   atomic.Uint64
	terms    []*fakeTerm
	mu       sync.Mutex
}

func (e *fakeElector) Campaign(ctx context.Context) (elector.Term, error) {
	if e.campaign != nil {
		return e.campaign(ctx)
	}
	return e.newTerm(), nil
}

func (e *fakeElector) newTerm() *fakeTerm {
	t := &fakeTerm{token: e.tokens.Add(1), done: make(chan struct{})}
	e.mu.Lock()
	e.terms = append(e.terms, t)
	e.mu.Unlock()
	return t
}

type fakeTerm struct {
	token    uint64
	done     chan struct{}
	once     sync.Once
	err      atomic.Pointer[error] // set by the first Resign or Abandon
	resigns  atomic.Int32
	abandons atomic.Int32
}

func (t *fakeTerm) Lease() elector.Lease {
	return elector.Lease{Name: leaseName, Holder: "fake", Token: t.token}
}
func (t *fakeTerm) Token() uint64         { return t.token }
func (t *fakeTerm) Done() <-chan struct{} { return t.done }
func (t *fakeTerm) Err() error {
	select {
	case <-t.done:
		return *t.err.Load()
	default:
		return nil
	}
}

func (t *fakeTerm) end(err error) {
	t.once.Do(func() {
		t.err.Store(&err)
		close(t.done)
	})
}

func (t *fakeTerm) Resign(context.Context) error {
	t.resigns.Add(1)
	t.end(elector.ErrResigned)
	return nil
}

// TrustRemaining is a minute while the term lasts.
func (t *fakeTerm) TrustRemaining() time.Duration {
	select {
	case <-t.done:
		return 0
	default:
		return time.Minute
	}
}

func (t *fakeTerm) Abandon() {
	t.abandons.Add(1)
	t.end(elector.ErrAbandoned)
}

// box is a value shared between the gate goroutine and the test.
type box[T any] struct {
	mu sync.Mutex
	v  T
}

func (b *box[T]) set(v T) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.v = v
}

func (b *box[T]) get() T {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.v
}

func (b *box[T]) update(f func(*T)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(&b.v)
}

func (h *hookLog) getCauses() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.causes...)
}

func (h *hookLog) getErrs() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.errs...)
}

func (e *fakeElector) allTerms() []*fakeTerm {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*fakeTerm(nil), e.terms...)
}

// syncBuffer is a buffer safe for a logger on another goroutine.
type syncBuffer = logbuf.Buffer

// ourGoroutines counts the gate goroutines of decorated jobs and the
// goroutines of the Stores' renewal schedules (the resume watch, and any
// renewal in flight) of the calling synctest bubble.
func ourGoroutines() int {
	return bubbleGoroutines("decorator.(*decorated).gate(", "elector.(*scheduler).")
}

// bubbleGoroutines counts the goroutines of the calling synctest bubble
// whose stack contains one of funcs, or all of them if funcs is empty.
// Goroutines outside the bubble, such as those of other tests still
// exiting, do not count (runtime.NumGoroutine would count them).
func bubbleGoroutines(funcs ...string) int {
	buf := make([]byte, 1<<20)
	self, _, _ := strings.Cut(string(buf[:runtime.Stack(buf, false)]), "\n")
	_, id, ok := strings.Cut(self, "synctest bubble ")
	if !ok {
		panic("bubbleGoroutines: not called in a synctest bubble: " + self)
	}
	bubble := "synctest bubble " + id // such as "synctest bubble 3]:"
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if strings.HasSuffix(header, bubble) &&
			(len(funcs) == 0 || slices.ContainsFunc(funcs, func(f string) bool { return strings.Contains(g, f) })) {
			n++
		}
	}
	return n
}
