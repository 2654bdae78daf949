package elector_test

import (
	"context"
	"fmt"
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

// plainStore is a memory store with neither Notifier nor BulkReader, as
// mysqllease has no push source: its watch learns only by polling.
type plainStore struct{ elector.Store }

// TestResignTellsTheSameStoresCandidates: a term resigned through the core
// frees its lease for the candidates of the same Store instance at once,
// without a Notifier and without waiting for the watch's next poll.
func TestResignTellsTheSameStoresCandidates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &plainStore{elector.NewMemoryStore()}
		ta, err := newElectorFor(t, s, "job", "a").Campaign(t.Context())
		require.NoError(t, err)
		won, stop := rollbacktest.CampaignAsync(t, newElectorFor(t, s, "job", "b"))
		defer stop()
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		require.NoError(t, ta.Resign(t.Context()))
		resigned := time.Now()
		tb := <-won
		assert.Less(t, time.Since(resigned), time.Millisecond, "taken over at once, not at the next poll")
		assert.Greater(t, tb.Token(), ta.Token())
		require.NoError(t, tb.Resign(t.Context()))
	})
}

// leaders records what a WatchLeader reports.
type leaders struct {
	mu  sync.Mutex
	got []elector.Lease
}

func (r *leaders) add(l elector.Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, l)
}

// holders returns "holder/token" of each report so far ("-" when free).
func (r *leaders) holders() []string {
	synctest.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	var hs []string
	for _, l := range r.got {
		if l.Holder == "" {
			hs = append(hs, "-")
			continue
		}
		hs = append(hs, fmt.Sprintf("%s/%d", l.Holder, l.Token))
	}
	return hs
}

// TestWatchLeaderOnAFollower: a replica that does not campaign learns of
// each new holder once, through its Store's watch: at start, on each new
// term, and when the lease becomes free, not on renewals.
func TestWatchLeaderOnAFollower(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(*elector.MemoryStore) elector.Store
	}{
		{"notifier", func(m *elector.MemoryStore) elector.Store { return &peer{MemoryStore: m} }},
		{"poll", func(m *elector.MemoryStore) elector.Store { return &plainStore{m} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := elector.NewMemoryStore()
				var r leaders
				stop := newElectorFor(t, tc.wrap(mem), "job", "f").WatchLeader(r.add)
				defer stop()
				assert.Equal(t, []string{"-"}, r.holders(), "at start")
				leader := &peer{MemoryStore: mem} // another replica
				ta, err := newElectorFor(t, leader, "job", "a").Campaign(t.Context())
				require.NoError(t, err)
				time.Sleep(3 * fast.RetryInterval) // renewals
				want := []string{"-", fmt.Sprintf("a/%d", ta.Token())}
				assert.Equal(t, want, r.holders())
				require.NoError(t, ta.Resign(t.Context()))
				time.Sleep(fast.RetryInterval)
				tb, err := newElectorFor(t, leader, "job", "b").Campaign(t.Context())
				require.NoError(t, err)
				time.Sleep(3 * fast.RetryInterval)
				want = append(want, "-", fmt.Sprintf("b/%d", tb.Token()))
				assert.Equal(t, want, r.holders())
				require.NoError(t, tb.Resign(t.Context()))
				time.Sleep(fast.RetryInterval)
				want = append(want, "-")
				assert.Equal(t, want, r.holders())
				stop()
				tc, err := newElectorFor(t, leader, "job", "c").Campaign(t.Context())
				require.NoError(t, err)
				time.Sleep(3 * fast.RetryInterval)
				assert.Equal(t, want, r.holders(), "none after stop")
				require.NoError(t, tc.Resign(t.Context()))
			})
		})
	}
}

// TestWatchLeaderOnTheLeader: a candidate that watches its own lease
// learns of its own term at once, and of the term that replaces it.
func TestWatchLeaderOnTheLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := elector.NewMemoryStore()
		s := &plainStore{mem} // no push: what it learns at once comes from the core
		ea := newElectorFor(t, s, "job", "a")
		var r leaders
		stop := ea.WatchLeader(r.add)
		defer stop()
		synctest.Wait()
		ta, err := ea.Campaign(t.Context())
		require.NoError(t, err)
		assert.Equal(t, []string{"-", fmt.Sprintf("a/%d", ta.Token())}, r.holders(), "its own term, at once")
		time.Sleep(3 * fast.RetryInterval)
		ta.Abandon() // as a frozen holder's lease, it runs out
		tb, err := newElectorFor(t, &peer{MemoryStore: mem}, "job", "b").Campaign(t.Context())
		require.NoError(t, err)
		time.Sleep(fast.RetryInterval)
		assert.Equal(t, []string{"-", fmt.Sprintf("a/%d", ta.Token()), fmt.Sprintf("b/%d", tb.Token())}, r.holders())
		require.NoError(t, tb.Resign(t.Context()))
	})
}

// lateReads is a memory store whose GetMany, once armed, reads the leases
// and then waits for release before it answers: a late read.
type lateReads struct {
	*elector.MemoryStore
	armed   atomic.Bool
	reading chan struct{} // receives when an armed read has read
	release chan struct{}
}

func (s *lateReads) GetMany(ctx context.Context, names []string) ([]elector.Lease, error) {
	got, err := s.MemoryStore.GetMany(ctx, names)
	if s.armed.CompareAndSwap(true, false) {
		s.reading <- struct{}{}
		<-s.release
	}
	return got, err
}

// TestWatchLeaderIgnoresALateFreeRead: a free state read before this
// process's own acquire, and answered after it, reports no change.
func TestWatchLeaderIgnoresALateFreeRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &lateReads{MemoryStore: elector.NewMemoryStore(), reading: make(chan struct{}), release: make(chan struct{})}
		e := newElectorFor(t, s, "job", "a")
		var r leaders
		stop := e.WatchLeader(r.add)
		defer stop()
		assert.Equal(t, []string{"-"}, r.holders())
		s.armed.Store(true)
		<-s.reading // the next poll has read the lease free
		term, err := e.Campaign(t.Context())
		require.NoError(t, err)
		close(s.release)
		time.Sleep(2 * fast.RetryInterval)
		assert.Equal(t, []string{"-", fmt.Sprintf("a/%d", term.Token())}, r.holders())
		require.NoError(t, term.Resign(t.Context()))
	})
}

// TestWatchLeaderIgnoresALateHeldRead: the held state read before this
// process resigned the term, and answered after, reports no change.
func TestWatchLeaderIgnoresALateHeldRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &lateReads{MemoryStore: elector.NewMemoryStore(), reading: make(chan struct{}), release: make(chan struct{})}
		e := newElectorFor(t, s, "job", "a")
		term, err := e.Campaign(t.Context())
		require.NoError(t, err)
		var r leaders
		stop := e.WatchLeader(r.add)
		defer stop()
		held := fmt.Sprintf("a/%d", term.Token())
		assert.Equal(t, []string{held}, r.holders())
		s.armed.Store(true)
		<-s.reading // the next poll has read the lease held
		require.NoError(t, term.Resign(t.Context()))
		close(s.release)
		time.Sleep(2 * fast.RetryInterval)
		assert.Equal(t, []string{held, "-"}, r.holders())
	})
}

// TestWatchLeaderWhileLeadingCostsOneReadPerPoll: leaders that follow
// their own leases cost their Store one GetMany per poll of its watch
// (every RetryInterval, jittered down to half of it: a leader watch never
// takes a lease over) for all of them together.
func TestWatchLeaderWhileLeadingCostsOneReadPerPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &peer{MemoryStore: elector.NewMemoryStore()}
		var terms []elector.Term
		for i := range 3 {
			e := newElectorFor(t, s, fmt.Sprintf("job-%d", i), "a")
			defer e.WatchLeader(func(elector.Lease) {})()
			term, err := e.Campaign(t.Context())
			require.NoError(t, err)
			terms = append(terms, term)
		}
		synctest.Wait()
		before := s.getMany.Load()
		const span = 10 * time.Second
		time.Sleep(span)
		reads := s.getMany.Load() - before
		every := fast.RetryInterval
		t.Logf("%d GetMany in %v for 3 leases, polled every %v jittered", reads, span, every)
		assert.GreaterOrEqual(t, reads, int64(span/every)-1)
		assert.LessOrEqual(t, reads, int64(span/(every/2))+1)
		assert.Zero(t, s.gets.Load())
		for _, term := range terms {
			require.NoError(t, term.Resign(t.Context()))
		}
	})
}
