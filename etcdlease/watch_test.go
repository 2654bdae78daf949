package etcdlease

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/counting"
	"github.com/leaderaware/leaderaware/internal/testing/watchtest"
)

// wakeBound is how soon a watcher must wake after a release in another
// Store: the watch delivers it in milliseconds.
const wakeBound = 2 * time.Second

// TestReleaseWakesOtherStore proves that a release through one Store wakes
// the watchers of another Store (another client, as in another process),
// and only of the released name.
func TestReleaseWakesOtherStore(t *testing.T) {
	srv := startEtcd(t)
	prefix := uniquePrefix()
	watching, releasing := openStore(t, srv, WithPrefix(prefix)), openStore(t, srv, WithPrefix(prefix))
	ch, stop := watching.WatchRelease("job")
	defer stop()
	other, stopOther := watching.WatchRelease("other-job")
	defer stopOther()
	waitWatching(t, watching, 1)
	drain(ch) // the watch's start pokes every watcher; that wake does not count
	drain(other)

	l, err := releasing.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	_, err = releasing.Renew(testCtx(t), l, time.Minute)
	require.NoError(t, err)
	assert.False(t, woken(ch, 100*time.Millisecond), "an acquire or a renewal is no release")

	start := time.Now()
	require.NoError(t, releasing.Release(testCtx(t), l))
	require.True(t, woken(ch, wakeBound), "a release in another Store must wake the watcher within %v", wakeBound)
	t.Logf("woken %v after the release began", time.Since(start))
	assert.False(t, woken(other, 100*time.Millisecond), "a release must not wake the watchers of another name")
}

// TestDeleteWakesWatcher proves that an operator deleting a lease key (as
// etcdctl del would) wakes its watchers: the lease is free.
func TestDeleteWakesWatcher(t *testing.T) {
	srv := startEtcd(t)
	s := openStore(t, srv, WithPrefix(uniquePrefix()))
	_, err := s.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	ch, stop := s.WatchRelease("job")
	defer stop()
	waitWatching(t, s, 1)
	drain(ch)
	_, err = rawClient(t, srv).Delete(testCtx(t), s.Key("job"))
	require.NoError(t, err)
	assert.True(t, woken(ch, wakeBound), "deleting the key must wake the watcher within %v", wakeBound)
}

// TestOneWatchPerStore proves that watchers of many names share the one
// watch, started by the first WatchRelease, and that stop is idempotent
// and forgets the watcher.
func TestOneWatchPerStore(t *testing.T) {
	srv := startEtcd(t)
	s := openStore(t, srv, WithPrefix(uniquePrefix()))
	assert.Nil(t, s.watch, "no watch before the first WatchRelease")
	var stops []func()
	for _, name := range []string{"a", "b", "c", "a"} {
		_, stop := s.WatchRelease(name)
		stops = append(stops, stop)
	}
	waitWatching(t, s, 1)
	time.Sleep(50 * time.Millisecond)
	assert.EqualValues(t, 1, watchesStarted(s), "one watch for every name")
	for _, stop := range stops {
		stop()
		stop()
	}
	s.mu.Lock()
	assert.Empty(t, s.watchers)
	s.mu.Unlock()
}

// TestCloseStopsWatch proves that Close stops the watch and waits for its
// goroutine (goleak in TestMain checks that nothing is left), and that
// WatchRelease after Close starts nothing.
func TestCloseStopsWatch(t *testing.T) {
	srv := startEtcd(t)
	s, err := Open(testCtx(t), []string{srv.endpoint}, WithPrefix(uniquePrefix()))
	require.NoError(t, err)
	_, stop := s.WatchRelease("job")
	waitWatching(t, s, 1)
	w := s.watch
	require.NoError(t, s.Close())
	select {
	case <-w.done:
	default:
		t.Fatal("Close returned before the watch goroutine did")
	}
	stop()
	ch, stop := s.WatchRelease("job")
	stop()
	assert.NotNil(t, ch)
	assert.Same(t, w, s.watch, "WatchRelease after Close must not start another watch")
	require.NoError(t, s.Close(), "Close is idempotent")
}

// TestWatchSurvivesConnectionLoss proves that the watch outlives the loss
// of its connection (a network failure, a member restart): after the
// connection is cut, a release in another Store still wakes the watcher.
func TestWatchSurvivesConnectionLoss(t *testing.T) {
	srv := startEtcd(t)
	p := startProxy(t, srv)
	prefix := uniquePrefix()
	watching, err := Open(testCtx(t), []string{p.endpoint}, WithPrefix(prefix))
	require.NoError(t, err)
	defer func() { require.NoError(t, watching.Close()) }()
	releasing := openStore(t, srv, WithPrefix(prefix))
	ch, stop := watching.WatchRelease("job")
	defer stop()
	waitWatching(t, watching, 1)

	p.cut()
	// The client reconnects and resumes the watch from where it was, or
	// the watch fails and is created again (a poke). Wait for the client
	// to be back, then drain what came before the release.
	_, err = watching.Get(testCtx(t), "job")
	require.ErrorIs(t, err, elector.ErrNoLease)
	drain(ch)
	l, err := releasing.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, releasing.Release(testCtx(t), l))
	assert.True(t, woken(ch, 5*time.Second), "a release after the connection loss must wake the watcher")
}

// noState reports whether states receives nothing within d.
func noState(states <-chan elector.Lease, d time.Duration) (elector.Lease, bool) {
	select {
	case l := <-states:
		return l, false
	case <-time.After(d):
		return elector.Lease{}, true
	}
}

// TestWatchLeaseFirstState proves that a watcher gets the current lease
// (or the zero Lease, for a free name) once the watch has read the prefix,
// and a later watcher of a lease the watch already knows gets it at once,
// from the watch's copy.
func TestWatchLeaseFirstState(t *testing.T) {
	srv := startEtcd(t)
	prefix := uniquePrefix()
	holder, watching := openStore(t, srv, WithPrefix(prefix)), openStore(t, srv, WithPrefix(prefix))
	l, err := holder.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)

	states, stop := watching.WatchLease("job", time.Hour)
	defer stop()
	got := watchtest.ExpectState(t, states, l, wakeBound, "a held lease")
	assert.Equal(t, "job", got.Name)
	assert.Equal(t, time.Minute, got.TTL)
	assert.True(t, got.Written.Equal(l.Written), "written %v, want %v", got.Written, l.Written)
	free, stopFree := watching.WatchLease("free", time.Hour)
	defer stopFree()
	watchtest.ExpectState(t, free, elector.Lease{}, wakeBound, "a free lease")

	waitWatching(t, watching, 1)
	again, stopAgain := watching.WatchLease("job", time.Hour)
	defer stopAgain()
	select {
	case got := <-again:
		assert.True(t, got.Is(l), "got %+v, want %+v", got, l)
	default:
		t.Fatal("a watcher of a lease the watch has read must get it at once")
	}
	if got, ok := noState(states, 100*time.Millisecond); !ok {
		t.Fatalf("a state that did not change was delivered again: %+v", got)
	}
}

// TestWatchLeaseReadsWholePrefix proves that the watch's read of the
// prefix takes every page.
func TestWatchLeaseReadsWholePrefix(t *testing.T) {
	defer func(n int64) { listPage = n }(listPage)
	listPage = 2
	srv := startEtcd(t)
	prefix := uniquePrefix()
	holder, watching := openStore(t, srv, WithPrefix(prefix)), openStore(t, srv, WithPrefix(prefix))
	leases := make([]elector.Lease, 5)
	for i := range leases {
		var err error
		leases[i], err = holder.TryAcquire(testCtx(t), fmt.Sprintf("job-%d", i), "a", time.Minute, elector.Lease{})
		require.NoError(t, err)
	}
	_, stop := watching.WatchLease("other", time.Hour)
	defer stop()
	waitWatching(t, watching, 1)
	for i, l := range leases {
		states, stop := watching.WatchLease(fmt.Sprintf("job-%d", i), time.Hour)
		defer stop()
		select {
		case got := <-states:
			assert.True(t, got.Is(l), "job-%d: got %+v, want %+v", i, got, l)
		default:
			t.Fatalf("job-%d was not delivered at once", i)
		}
	}
}

// TestWatchLeaseDeliversWrites proves that a watcher gets every new state
// that other Stores write: a renewal (a new Version), a release and a
// delete (the zero Lease), and a new term of another holder.
func TestWatchLeaseDeliversWrites(t *testing.T) {
	srv := startEtcd(t)
	prefix := uniquePrefix()
	a, b, watching := openStore(t, srv, WithPrefix(prefix)), openStore(t, srv, WithPrefix(prefix)), openStore(t, srv, WithPrefix(prefix))
	l, err := a.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	states, stop := watching.WatchLease("job", time.Hour)
	defer stop()
	watchtest.ExpectState(t, states, l, wakeBound, "the first state")

	renewed, err := a.Renew(testCtx(t), l, 2*time.Minute)
	require.NoError(t, err)
	got := watchtest.ExpectState(t, states, renewed, wakeBound, "a renewal")
	assert.Equal(t, 2*time.Minute, got.TTL)

	// b takes the lease over, as a candidate that watched it for its TTL.
	taken, err := b.TryAcquire(testCtx(t), "job", "b", time.Minute, renewed)
	require.NoError(t, err)
	require.Greater(t, taken.Token, l.Token)
	watchtest.ExpectState(t, states, taken, wakeBound, "a takeover")

	require.NoError(t, b.Release(testCtx(t), taken))
	watchtest.ExpectState(t, states, elector.Lease{}, wakeBound, "a release")

	again, err := a.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	watchtest.ExpectState(t, states, again, wakeBound, "a new term after the release")
	_, err = rawClient(t, srv).Delete(testCtx(t), a.Key("job"))
	require.NoError(t, err)
	watchtest.ExpectState(t, states, elector.Lease{}, wakeBound, "a delete")
}

// TestWatchLeaseStop proves that stop ends the deliveries to its watcher
// only, is idempotent, and that the watch's copy then forgets a free name.
func TestWatchLeaseStop(t *testing.T) {
	srv := startEtcd(t)
	prefix := uniquePrefix()
	holder, watching := openStore(t, srv, WithPrefix(prefix)), openStore(t, srv, WithPrefix(prefix))
	l, err := holder.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	states, stop := watching.WatchLease("job", time.Hour)
	other, stopOther := watching.WatchLease("job", time.Hour)
	defer stopOther()
	free, stopFree := watching.WatchLease("free", time.Hour)
	watchtest.ExpectState(t, states, l, wakeBound, "the first state")
	watchtest.ExpectState(t, other, l, wakeBound, "the first state")
	watchtest.ExpectState(t, free, elector.Lease{}, wakeBound, "the first state")
	stop()
	stop()
	stopFree()

	renewed, err := holder.Renew(testCtx(t), l, time.Minute)
	require.NoError(t, err)
	watchtest.ExpectState(t, other, renewed, wakeBound, "the watcher that did not stop")
	if got, ok := noState(states, 100*time.Millisecond); !ok {
		t.Fatalf("a stopped watcher received %+v", got)
	}
	watching.mu.Lock()
	defer watching.mu.Unlock()
	assert.NotContains(t, watching.leases, "free", "the copy keeps no free name nobody watches")
	assert.Len(t, watching.leases["job"].subs, 1)
}

// TestWatchLeaseClose proves that Close stops the watch and its goroutine
// (goleak in TestMain checks that nothing is left), that a watcher then
// receives nothing, not even a state delivered before Close, and that
// WatchLease after Close starts nothing.
func TestWatchLeaseClose(t *testing.T) {
	srv := startEtcd(t)
	prefix := uniquePrefix()
	holder := openStore(t, srv, WithPrefix(prefix))
	s, err := Open(testCtx(t), []string{srv.endpoint}, WithPrefix(prefix))
	require.NoError(t, err)
	l, err := holder.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	states, stop := s.WatchLease("job", time.Hour)
	defer stop()
	waitWatching(t, s, 1) // the first state is in the channel
	w := s.watch
	require.NoError(t, s.Close())
	select {
	case <-w.done:
	default:
		t.Fatal("Close returned before the watch goroutine did")
	}
	_, err = holder.Renew(testCtx(t), l, time.Minute)
	require.NoError(t, err)
	if got, ok := noState(states, 100*time.Millisecond); !ok {
		t.Fatalf("a watcher received %+v after Close", got)
	}
	after, stopAfter := s.WatchLease("job", time.Hour)
	stopAfter()
	assert.Same(t, w, s.watch, "WatchLease after Close must not start another watch")
	if got, ok := noState(after, 50*time.Millisecond); !ok {
		t.Fatalf("a watcher after Close received %+v", got)
	}
}

// TestWatchLeaseSurvivesConnectionLoss proves that the watcher keeps
// delivering after its connection is cut.
func TestWatchLeaseSurvivesConnectionLoss(t *testing.T) {
	srv := startEtcd(t)
	p := startProxy(t, srv)
	prefix := uniquePrefix()
	watching, err := Open(testCtx(t), []string{p.endpoint}, WithPrefix(prefix))
	require.NoError(t, err)
	defer func() { require.NoError(t, watching.Close()) }()
	holder := openStore(t, srv, WithPrefix(prefix))
	l, err := holder.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	states, stop := watching.WatchLease("job", time.Hour)
	defer stop()
	watchtest.ExpectState(t, states, l, wakeBound, "the first state")

	p.cut()
	renewed, err := holder.Renew(testCtx(t), l, time.Minute) // while the client reconnects
	require.NoError(t, err)
	watchtest.ExpectState(t, states, renewed, 10*time.Second, "a renewal after the connection loss")
	require.NoError(t, holder.Release(testCtx(t), renewed))
	watchtest.ExpectState(t, states, elector.Lease{}, 10*time.Second, "a release after the connection loss")
}

// countingStore counts TryAcquire calls and keeps the Store's WatchLease
// visible to the elector.
type countingStore = counting.Store[*Store]

// TestWaitingCandidatesMakeNoCalls: 100 candidates that wait on one Store
// for 100 leases that another Store holds and renews make no store call of
// their own while they wait, although their RetryInterval (20ms) would
// have them read their lease 50 times a second: the Store's one watch
// delivers every renewal, and reads the prefix once. A released lease is
// taken over at once, with one TryAcquire. The TTL is long so that no
// candidate's watch completes even on a starved machine.
func TestWaitingCandidatesMakeNoCalls(t *testing.T) {
	const (
		n     = 100
		ttl   = time.Minute
		renew = 500 * time.Millisecond
	)
	srv := startEtcd(t)
	prefix := uniquePrefix()
	holder := openStore(t, srv, WithPrefix(prefix))
	cs := &countingStore{S: openStore(t, srv, WithPrefix(prefix))}
	ctx, cancel := context.WithCancel(testCtx(t))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	var renewed renewals
	terms := make([]elector.Term, n)
	for i := range terms {
		e, err := elector.New(holder, fmt.Sprintf("job-%d", i), elector.Config{TTL: ttl, RenewInterval: renew, Holder: "a", Observer: &renewed})
		require.NoError(t, err)
		terms[i], err = e.Campaign(ctx)
		require.NoError(t, err)
		defer terms[i].Abandon()
	}
	type result struct {
		i    int
		term elector.Term
		err  error
		at   time.Time
	}
	won := make(chan result, n)
	for i := range n {
		e, err := elector.New(cs, fmt.Sprintf("job-%d", i), elector.Config{TTL: ttl, RenewInterval: renew, RetryInterval: 20 * time.Millisecond, Holder: "b"})
		require.NoError(t, err)
		wg.Go(func() {
			term, err := e.Campaign(ctx)
			won <- result{i, term, err, time.Now()}
		})
	}
	require.Eventually(t, func() bool { return cs.Acquires.Load() >= n }, 10*time.Second, time.Millisecond,
		"each candidate tries once and is refused")
	// Wait, by the holders' own count, until every lease was renewed about
	// twice: polling candidates would have read their lease some 50 times
	// each by then.
	from := renewed.n.Load()
	require.Eventually(t, func() bool { return renewed.n.Load() >= from+2*n }, 30*time.Second, 10*time.Millisecond)
	require.Equal(t, int64(n), cs.Acquires.Load(), "waiting candidates made store calls")
	assert.EqualValues(t, 1, watchesStarted(cs.S), "one watch, one read of the prefix")
	select {
	case r := <-won:
		t.Fatalf("candidate %d returned while its holder renewed: %v", r.i, r.err)
	default:
	}

	var took time.Duration
	for i := range n / 2 {
		start := time.Now()
		require.NoError(t, terms[i].Resign(ctx))
		select {
		case r := <-won:
			require.NoError(t, r.err)
			require.Equal(t, i, r.i, "only the released lease may change hands")
			took = max(took, r.at.Sub(start))
			defer func() { require.NoError(t, r.term.Resign(testCtx(t))) }()
		case <-time.After(10 * time.Second):
			t.Fatalf("no candidate took job-%d over within 10s of its release", i)
		}
	}
	t.Logf("%d released leases taken over, each within %v of its release", n/2, took)
	assert.Less(t, took, wakeBound)
	assert.EqualValues(t, n+n/2, cs.Acquires.Load(), "one TryAcquire per released lease")
}

// renewals counts the successful renewals an elector reports.
type renewals struct{ n atomic.Int64 }

func (r *renewals) Observe(ev elector.Event) {
	if ev.Kind == elector.EventStoreOp && ev.Op == elector.OpRenew && ev.Result == elector.ResultOK {
		r.n.Add(1)
	}
}

// countingHandler counts the records logged with a message.
type countingHandler struct {
	msg string
	n   *atomic.Int64
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }

// TestWatchBacksOffWhenReadsFail: a watch that etcd creates but whose read
// of the prefix fails every time (here: no time to read) is started again
// with a growing backoff, not every 50 ms: a struggling etcd is not asked
// for the whole prefix over and over.
func TestWatchBacksOffWhenReadsFail(t *testing.T) {
	srv := startEtcd(t)
	var restarts atomic.Int64
	log := slog.New(countingHandler{"etcdlease: watch failed; starting it again", &restarts})
	s, err := New(rawClient(t, srv), WithPrefix(uniquePrefix()), WithOpTimeout(time.Microsecond), WithLogger(log))
	require.NoError(t, err)
	defer s.Close()
	_, stop := s.WatchLease("job", time.Second)
	defer stop()
	time.Sleep(2 * time.Second)
	// 50 ms doubling to 5 s: 5 or 6 starts in 2 s; without the backoff, 40.
	assert.Less(t, restarts.Load(), int64(10), "restarts in 2s")
	t.Logf("%d restarts in 2s", restarts.Load())
}
