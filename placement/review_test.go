package placement_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/placement"
)

// gatedStore holds each TryAcquire of a lease whose name has the prefix
// until open is closed.
type gatedStore struct {
	*elector.MemoryStore
	prefix string
	open   chan struct{}
}

func (s *gatedStore) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	if strings.HasPrefix(name, s.prefix) {
		select {
		case <-s.open:
		case <-ctx.Done():
			return elector.Lease{}, ctx.Err()
		}
	}
	return s.MemoryStore.TryAcquire(ctx, name, holder, ttl, observed)
}

// A Close that comes while Start is taking its seat wins: Start returns an
// error, and the replica keeps no seat (which would make the others count,
// and yield leases to, a member that left) and no goroutine.
func TestCloseDuringStartKeepsNoSeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := elector.NewMemoryStore()
		s := &gatedStore{MemoryStore: mem, prefix: "leaderaware.group/", open: make(chan struct{})}
		g, err := placement.New(s, placement.Config{Name: "app", Holder: "a", TTL: testTTL, RetryInterval: testRetry, Logger: discard})
		require.NoError(t, err)
		started := make(chan error, 1)
		go func() { started <- g.Start(ctx) }()
		synctest.Wait() // Start waits in the seat's acquire
		require.NoError(t, g.Close(ctx))
		close(s.open)
		err = <-started
		defer func() { _ = g.Close(ctx) }() // if Start did start the group, stop it
		require.ErrorContains(t, err, "after Close")
		time.Sleep(testTTL)
		synctest.Wait()
		l, err := mem.Get(ctx, "leaderaware.group/app/seat/0")
		if err == nil {
			require.Zero(t, l.Token, "the seat is free, not held by %q", l.Holder)
		}
	})
}

// A Drain that comes while a candidate waits out its Hold before taking a
// free lease still leaves the replica leading nothing: a lease it takes
// with a hold from before the drain is yielded at once, not kept while
// Drain reports the replica drained.
func TestDrainDuringHoldLeadsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c := newCluster(t, 2, placement.Config{})
		// Someone outside the group holds job-00 until the replica has
		// job-01, so the candidate for job-00 holds back (one lease held).
		other, err := elector.New(c.mem, "job-00", elector.Config{Holder: "other", TTL: testTTL, RetryInterval: testRetry})
		require.NoError(t, err)
		term, err := other.Campaign(ctx)
		require.NoError(t, err)
		r := c.add()
		c.start(r)
		time.Sleep(time.Second)
		synctest.Wait()
		require.Equal(t, []int{1}, c.shares())
		require.NoError(t, term.Resign(ctx))
		synctest.Wait() // the candidate for job-00 waits out its Hold
		require.NoError(t, r.g.Drain(ctx))
		time.Sleep(testRetry)
		synctest.Wait()
		require.Equal(t, []int{0}, c.shares(), "Drain returned: the replica leads nothing before its TTL hold")
		time.Sleep(testTTL + decorator.DefaultBackoffMin)
		synctest.Wait()
		require.Equal(t, []int{2}, c.shares(), "alone, it takes both back after its TTL hold (and, for job-00, which yielded before its job started, the decorator's backoff)")
	})
}

// A live member that takes nothing (its jobs stopped, or it runs other
// leases in the same group) does not make the others yield to it for ever:
// after a yield nobody took, the leases stay put, each led nearly all the
// time.
func TestMemberThatTakesNothingStopsChurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c := newCluster(t, 4, placement.Config{})
		a, b := c.add(), c.add()
		c.start(a)
		require.NoError(t, b.g.Start(ctx)) // b's group only: it campaigns for nothing
		b.jobs = nil
		time.Sleep(10 * time.Second)
		synctest.Wait()
		_, before := c.led.counts()
		starts := c.starts()
		const span = 120 * time.Second
		time.Sleep(span)
		synctest.Wait()
		t.Logf("restarts in %v: %d (%d in the first 10s)", span, c.starts()-starts, starts)
		require.Equal(t, []int{4, 0}, c.shares())
		require.LessOrEqual(t, c.starts()-starts, 10, "a futile yield is not repeated every few RetryIntervals (314 restarts without the pause)")
		_, after := c.led.counts()
		require.Zero(t, after-before)
	})
}
