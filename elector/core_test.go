package elector_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/rollbacktest"
)

// peer is another instance of a memory store on the same leases, as a
// second Open of one database is: the elector gives it a schedule and a
// watch of its own. It counts its calls.
type peer struct {
	*elector.MemoryStore
	acquires, gets, getMany, renews, renewMany atomic.Int64
	batchSizes                                 sync.Map // size → *atomic.Int64
}

func (p *peer) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	p.acquires.Add(1)
	return p.MemoryStore.TryAcquire(ctx, name, holder, ttl, observed)
}

func (p *peer) Get(ctx context.Context, name string) (elector.Lease, error) {
	p.gets.Add(1)
	return p.MemoryStore.Get(ctx, name)
}

func (p *peer) GetMany(ctx context.Context, names []string) ([]elector.Lease, error) {
	p.getMany.Add(1)
	return p.MemoryStore.GetMany(ctx, names)
}

func (p *peer) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	p.renews.Add(1)
	return p.MemoryStore.Renew(ctx, l, ttl)
}

func (p *peer) RenewMany(ctx context.Context, terms []elector.Lease) ([]elector.Lease, error) {
	p.renewMany.Add(1)
	n, _ := p.batchSizes.LoadOrStore(len(terms), new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	return p.MemoryStore.RenewMany(ctx, terms)
}

// bubbleGoroutinesExcept counts the goroutines of the calling synctest
// bubble, but for the caller, synctest's own, and those whose stack has one
// of frames.
func bubbleGoroutinesExcept(frames ...string) int {
	frames = append(frames, "internal/synctest.Run(", "testing/synctest.testingSynctestTest(")
	buf := make([]byte, 1<<24)
	all := string(buf[:runtime.Stack(buf, true)])
	self := make([]byte, 1<<16)
	head, _, _ := strings.Cut(string(self[:runtime.Stack(self, false)]), "\n")
	_, id, ok := strings.Cut(head, "synctest bubble ")
	if !ok {
		panic("not in a synctest bubble: " + head)
	}
	bubble := "synctest bubble " + id
	n := 0
next:
	for _, g := range strings.Split(all, "\n\n") {
		first, _, _ := strings.Cut(g, "\n")
		if !strings.Contains(first, bubble) || first == head {
			continue
		}
		for _, f := range frames {
			if strings.Contains(g, f) {
				continue next
			}
		}
		n++
	}
	return n
}

const campaignFrame = "elector.(*LeaseElector).Campaign("

// TestThousandTermsRunOnFewGoroutines: 1,000 terms held through one Store
// (elector.New per lease) and 1,000 candidates waiting on them through
// another run on at most 20 goroutines besides the candidates' own, renew
// in a few batched calls per RenewInterval, and leave no goroutine once the
// terms have ended and the campaigns returned.
func TestThousandTermsRunOnFewGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 1000
		mem := elector.NewMemoryStore()
		holders, watchers := &peer{MemoryStore: mem}, &peer{MemoryStore: mem}
		cfg := elector.Config{TTL: 15 * time.Second, RenewInterval: 5 * time.Second, RetryInterval: 2 * time.Second}
		terms := make([]elector.Term, n)
		for i := range n {
			cfg.Holder = "holder"
			e, err := elector.New(holders, fmt.Sprintf("lease/%d", i), cfg)
			require.NoError(t, err)
			terms[i] = campaign(t, e)
			time.Sleep(cfg.RenewInterval / n) // spread over one RenewInterval
		}
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for i := range n {
			cfg.Holder = "candidate"
			e, err := elector.New(watchers, fmt.Sprintf("lease/%d", i), cfg)
			require.NoError(t, err)
			wg.Go(func() {
				_, err := e.Campaign(ctx)
				assert.ErrorIs(t, err, context.Canceled)
			})
		}
		synctest.Wait()
		renewMany0, getMany0 := holders.renewMany.Load(), watchers.getMany.Load()
		most := 0
		for range 40 { // 8 RenewIntervals, sampled in between
			time.Sleep(time.Second)
			synctest.Wait()
			most = max(most, bubbleGoroutinesExcept(campaignFrame))
		}
		t.Logf("at most %d goroutines; %d RenewMany and %d GetMany calls in 40s", most,
			holders.renewMany.Load()-renewMany0, watchers.getMany.Load()-getMany0)
		assert.LessOrEqual(t, most, 20, "goroutines besides the candidates' own")
		assert.Zero(t, holders.renews.Load(), "a BatchRenewer renews in batches only")
		// 1,000 terms renewed 8 times each in chunks of up to 500, in
		// windows of a quarter RenewInterval: about 5 windows per interval.
		assert.LessOrEqual(t, holders.renewMany.Load()-renewMany0, int64(8*6*2))
		// Polls every SafetyMargin(TTL)/2 = 750ms, jittered: at least 375ms apart.
		assert.LessOrEqual(t, watchers.getMany.Load()-getMany0, int64(40000/375*2+2), "one read of every watched lease per poll, at least 375ms apart, in 2 chunks")
		assert.EqualValues(t, n, watchers.acquires.Load(), "waiting candidates make no TryAcquire while the holders renew")
		assert.Zero(t, watchers.gets.Load(), "a BulkReader is read in bulk only")
		for i, term := range terms {
			require.NoError(t, term.Err(), "term %d", i)
			assert.Greater(t, term.Lease().Version, uint64(8), "term %d renewed every RenewInterval", i)
		}
		cancel()
		wg.Wait()
		for _, term := range terms {
			require.NoError(t, term.Resign(t.Context()))
		}
		synctest.Wait()
		assert.Zero(t, bubbleGoroutinesExcept(), "goroutines after the last term and campaign")
	})
}

// TestRenewalsDueTogetherGoInOneCall: terms due within a quarter of their
// RenewInterval of the soonest renew with it, early, in one RenewMany; a
// term due later renews on its own time.
func TestRenewalsDueTogetherGoInOneCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &peer{MemoryStore: elector.NewMemoryStore()}
		newTerm := func(name string) elector.Term {
			e, err := elector.New(s, name, fast) // RenewInterval 1s
			require.NoError(t, err)
			term := campaign(t, e)
			t.Cleanup(func() { assert.NoError(t, term.Resign(context.Background())) })
			return term
		}
		a := newTerm("a")
		time.Sleep(200 * time.Millisecond)
		b := newTerm("b") // due 200ms after a: within 250ms
		time.Sleep(200 * time.Millisecond)
		c := newTerm("c") // due 400ms after a: on its own
		time.Sleep(time.Second - 400*time.Millisecond)
		synctest.Wait()
		assert.EqualValues(t, 1, s.renewMany.Load(), "a and b renew together at a's time")
		assert.Equal(t, uint64(2), a.Lease().Version)
		assert.Equal(t, uint64(2), b.Lease().Version, "b renews 200ms early")
		assert.Equal(t, uint64(1), c.Lease().Version)
		time.Sleep(400 * time.Millisecond)
		synctest.Wait()
		assert.EqualValues(t, 2, s.renewMany.Load(), "c renews on its own time")
		assert.Equal(t, uint64(2), c.Lease().Version)
		// b now renews on a's schedule: one call per interval for both.
		time.Sleep(3 * time.Second)
		synctest.Wait()
		assert.EqualValues(t, 2+3*2, s.renewMany.Load())
		assert.Equal(t, uint64(5), a.Lease().Version)
		assert.Equal(t, uint64(5), b.Lease().Version)
	})
}

// hangingStore is a memory store without BatchRenewer whose Renew hangs,
// for the leases in hang, until its context ends.
type hangingStore struct {
	elector.Store
	hang              map[string]bool
	inFlight, maxSeen atomic.Int64
}

func (s *hangingStore) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for m := s.maxSeen.Load(); n > m && !s.maxSeen.CompareAndSwap(m, n); m = s.maxSeen.Load() {
	}
	if s.hang[l.Name] {
		<-ctx.Done()
		return elector.Lease{}, ctx.Err()
	}
	return s.Store.Renew(ctx, l, ttl)
}

// TestHungRenewalsBlockNoOtherTerm: renewals that hang (one Renew per term
// on a store that cannot batch) end their terms exactly at their trust
// windows, while the other terms of the Store keep renewing.
func TestHungRenewalsBlockNoOtherTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &hangingStore{Store: elector.NewMemoryStore(), hang: map[string]bool{}}
		start := time.Now()
		hung := holdMany(t, s, "hung", 5, true)
		healthy := holdMany(t, s, "healthy", 5, false)
		for _, term := range hung {
			<-term.Done()
			assert.Equal(t, fast.TTL-elector.SafetyMargin(fast.TTL), time.Since(start), "a term ends exactly at its trust window")
			assert.ErrorIs(t, term.Err(), elector.ErrLeaseExpired)
			assert.ErrorContains(t, term.Err(), "deadline exceeded", "the last renewal's error")
		}
		time.Sleep(10 * time.Second)
		for i, term := range healthy {
			assert.NoError(t, term.Err(), "healthy term %d", i)
			assert.Greater(t, term.Lease().Version, uint64(10), "healthy term %d renewed every second", i)
		}
	})
}

// TestRenewalsInFlightAreBounded: however many renewals hang, the schedule
// of one Store has at most 16 in flight, and each term still ends exactly
// at its trust window.
func TestRenewalsInFlightAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &hangingStore{Store: elector.NewMemoryStore(), hang: map[string]bool{}}
		start := time.Now()
		hung := holdMany(t, s, "hung", 100, true)
		for _, term := range hung {
			<-term.Done()
			assert.Equal(t, fast.TTL-elector.SafetyMargin(fast.TTL), time.Since(start), "a term ends exactly at its trust window")
		}
		assert.EqualValues(t, 16, s.maxSeen.Load(), "renewals in flight at once")
	})
}

// holdMany wins n terms of leases prefix/i on s, hanging their renewals if
// hang, and resigns them when the test ends.
func holdMany(t *testing.T, s *hangingStore, prefix string, n int, hang bool) []elector.Term {
	terms := make([]elector.Term, n)
	for i := range n {
		name := fmt.Sprintf("%s/%d", prefix, i)
		s.hang[name] = hang
		e, err := elector.New(s, name, fast)
		require.NoError(t, err)
		terms[i] = campaign(t, e)
		t.Cleanup(func() { assert.NoError(t, terms[i].Resign(context.Background())) })
	}
	return terms
}

// notifyCounting is a memory store that counts its active Notify
// registrations and can push states of its own.
type notifyCounting struct {
	*elector.MemoryStore
	active atomic.Int64
	mu     sync.Mutex
	pushes []func(elector.Change)
}

func (s *notifyCounting) Notify(changed func(elector.Change)) func() {
	s.active.Add(1)
	stop := s.MemoryStore.Notify(changed)
	s.mu.Lock()
	s.pushes = append(s.pushes, changed)
	s.mu.Unlock()
	return func() {
		stop()
		s.mu.Lock()
		s.pushes = nil
		s.mu.Unlock()
		s.active.Add(-1)
	}
}

func (s *notifyCounting) push(c elector.Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.pushes {
		f(c)
	}
}

// TestOneNotifyPerStore: the watch calls Notify once, while candidates
// wait, however many, and stops it when the last returns.
func TestOneNotifyPerStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := elector.NewMemoryStore()
		s := &notifyCounting{MemoryStore: mem}
		var terms []elector.Term
		for i := range 10 {
			terms = append(terms, campaign(t, newElectorFor(t, mem, fmt.Sprintf("n/%d", i), "a")))
		}
		assert.Zero(t, s.active.Load(), "no Notify before a candidate waits")
		var won []<-chan elector.Term
		for i := range 10 {
			w, stop := rollbacktest.CampaignAsync(t, newElectorFor(t, s, fmt.Sprintf("n/%d", i), "b"))
			defer stop()
			won = append(won, w)
		}
		synctest.Wait()
		assert.EqualValues(t, 1, s.active.Load(), "one Notify for every waiting candidate")
		for i, term := range terms {
			require.NoError(t, term.Resign(t.Context()))
			tb := <-won[i]
			require.NoError(t, tb.Resign(t.Context()))
			synctest.Wait()
			if i < len(terms)-1 {
				assert.EqualValues(t, 1, s.active.Load())
			}
		}
		assert.Zero(t, s.active.Load(), "Notify stopped with the last waiting candidate")
	})
}

func newElectorFor(t *testing.T, s elector.Store, name, holder string) *elector.LeaseElector {
	t.Helper()
	cfg := fast
	cfg.Holder = holder
	e, err := elector.New(s, name, cfg)
	require.NoError(t, err)
	return e
}

// TestWatchDropsOlderHeldStates: a held state older than one the watch
// delivered (a late read) does not restart the candidate's watch: a dead
// holder is taken over TTL after its last renewal, not TTL after the late
// state.
func TestWatchDropsOlderHeldStates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := elector.NewMemoryStore()
		s := &notifyCounting{MemoryStore: mem}
		first, err := mem.TryAcquire(t.Context(), "job", "a", fast.TTL, elector.Lease{})
		require.NoError(t, err)
		won, stop := rollbacktest.CampaignAsync(t, newElectorFor(t, s, "job", "b"))
		defer stop()
		time.Sleep(time.Second)
		last, err := mem.Renew(t.Context(), first, fast.TTL) // then a dies
		require.NoError(t, err)
		renewed := time.Now()
		time.Sleep(time.Second)
		s.push(elector.Change{Name: "job", State: first, Known: true}) // a late read
		tb := <-won
		assert.Equal(t, fast.TTL, time.Since(renewed), "taken over TTL after the last renewal")
		assert.Greater(t, tb.Token(), last.Token)
		require.NoError(t, tb.Resign(t.Context()))
	})
}

// TestWatchDeliversFreeStates: a free state reaches a waiting candidate at
// once, whatever the watch delivered before, and a read request from the
// Notifier reads the lease.
func TestWatchDeliversFreeStates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := elector.NewMemoryStore()
		s := &notifyCounting{MemoryStore: mem}
		l, err := mem.TryAcquire(t.Context(), "job", "a", fast.TTL, elector.Lease{})
		require.NoError(t, err)
		won, stop := rollbacktest.CampaignAsync(t, newElectorFor(t, s, "job", "b"))
		defer stop()
		time.Sleep(500 * time.Millisecond)
		// A stale free state: the compare-and-set it causes is refused
		// and the candidate watches on.
		s.push(elector.Change{Name: "job", State: elector.Lease{Name: "job"}, Known: true})
		synctest.Wait()
		select {
		case <-won:
			t.Fatal("a stale free state took a held lease")
		default:
		}
		// A release the store reports only as "read again".
		s.mu.Lock()
		s.pushes = append(s.pushes[:0:0], func(elector.Change) {}) // the store's own pushes go on
		s.mu.Unlock()
		time.Sleep(100 * time.Millisecond)
		require.NoError(t, mem.Release(t.Context(), l))
		released := time.Now()
		tb := <-won
		assert.Less(t, time.Since(released), fast.RetryInterval+time.Millisecond)
		require.NoError(t, tb.Resign(t.Context()))
	})
}

// stuckReads is a memory store without Notifier whose first GetMany hangs
// until its context ends.
type stuckReads struct {
	elector.Store
	mem   *elector.MemoryStore
	reads atomic.Int64
}

func (s *stuckReads) GetMany(ctx context.Context, names []string) ([]elector.Lease, error) {
	if s.reads.Add(1) == 1 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.mem.GetMany(ctx, names)
}

// TestStuckReadDelaysTheWatchOneRetryInterval: a read that hangs is given
// up after the longer of the RetryInterval and SafetyMargin(TTL), so the
// next poll finds a release.
func TestStuckReadDelaysTheWatchOneRetryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := elector.NewMemoryStore()
		cfg := elector.Config{TTL: time.Minute, RetryInterval: 2 * time.Second, Holder: "a"}
		ea, err := elector.New(mem, "job", cfg)
		require.NoError(t, err)
		ta := campaign(t, ea)
		cfg.Holder = "b"
		eb, err := elector.New(&stuckReads{Store: mem, mem: mem}, "job", cfg)
		require.NoError(t, err)
		won, stop := rollbacktest.CampaignAsync(t, eb)
		defer stop()
		start := time.Now()
		time.Sleep(time.Millisecond)
		require.NoError(t, ta.Resign(t.Context())) // during the stuck read
		tb := <-won
		assert.LessOrEqual(t, time.Since(start), elector.SafetyMargin(cfg.TTL)+cfg.RetryInterval, "the stuck read given up after the margin, then one poll")
		require.NoError(t, tb.Resign(t.Context()))
	})
}
