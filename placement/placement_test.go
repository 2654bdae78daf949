package placement_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/crashstore"
	"github.com/leaderaware/leaderaware/internal/testing/logbuf"
	"github.com/leaderaware/leaderaware/placement"
)

// Three leases on three replicas started one after another end one each,
// never with two leaders.
func TestStaggeredStartEndsOneEach(t *testing.T) {
	for _, plain := range []bool{false, true} {
		name := "bulk"
		if plain {
			name = "plain store"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCluster(t, 3, placement.Config{})
				c.plain = plain
				c.startStaggered(3, 5*time.Second, []int{1, 1, 1})
				overlaps, handoffs := c.led.counts()
				require.Zero(t, overlaps, "starts while another replica ran the lease")
				require.LessOrEqual(t, handoffs, 2, "the first replica gives one lease to each later one")
			})
		})
	}
}

// Fifty leases on five replicas started at once end with at most T+1 = 11
// each.
func TestColdStartSpreadsFiftyOnFive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 50, placement.Config{})
		for range 5 {
			c.add()
		}
		for _, r := range c.reps {
			c.start(r)
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		shares := c.shares()
		overlaps, handoffs := c.led.counts()
		t.Logf("shares %v, handoffs %d", shares, handoffs)
		require.LessOrEqual(t, slices.Max(shares), 11, "shares %v", shares)
		require.Equal(t, 50, sum(shares), "every lease runs")
		require.Zero(t, overlaps)
	})
}

// After a replica crashes (its store calls fail, it releases nothing),
// every lease it led runs again within TTL + RetryInterval of its last
// write, never while its own job still ran.
func TestCrashedReplicaLeasesRunAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 9, placement.Config{})
		c.startBalanced(3, []int{3, 3, 3})
		dead := c.reps[0]
		var led []int
		for i := range c.leases {
			if c.led.runner(i) == dead.id {
				led = append(led, i)
			}
		}
		dead.store.Crash()
		deadline := time.Now().Add(testTTL + testRetry)
		for time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		synctest.Wait()
		for _, i := range led {
			rep := c.led.runner(i)
			require.NotEqual(t, -1, rep, "lease %s runs again", c.leases[i])
			require.NotEqual(t, dead.id, rep)
			c.led.mu.Lock()
			took := c.led.started[i].Sub(dead.store.LastWrite(c.leases[i]))
			c.led.mu.Unlock()
			require.LessOrEqual(t, took, testTTL+testRetry, "lease %s", c.leases[i])
		}
		time.Sleep(20 * time.Second)
		synctest.Wait()
		require.ElementsMatch(t, []int{0, 4, 5}, c.shares(), "the two live replicas share the leases")
		overlaps, _ := c.led.counts()
		require.Zero(t, overlaps)
	})
}

// Drain hands every lease of the replica to the others within one
// RetryInterval, never with two leaders; the drained replica stays out
// until Resume, and then gets its share back.
func TestDrainHandsOffEveryLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c := newCluster(t, 9, placement.Config{})
		c.startBalanced(3, []int{3, 3, 3})
		r := c.reps[0]
		begin := time.Now()
		require.NoError(t, r.g.Drain(ctx))
		synctest.Wait()
		require.Equal(t, 0, c.shares()[0], "Drain returns when the replica leads nothing")
		self := r.g.Members()[0]
		require.True(t, self.Self && self.Draining, "%+v", self)
		time.Sleep(testRetry)
		synctest.Wait()
		c.led.mu.Lock()
		for i, reps := range c.led.running {
			require.Len(t, reps, 1, "lease %s runs on one replica", c.leases[i])
			if c.led.started[i].After(begin) {
				require.LessOrEqual(t, c.led.started[i].Sub(begin), testRetry, "lease %s", c.leases[i])
			}
		}
		c.led.mu.Unlock()
		require.Equal(t, []string{"replica-1", "replica-2"}, holders(c.reps[1].g.Members()), "the others no longer count it")

		time.Sleep(3 * testTTL)
		synctest.Wait()
		require.Equal(t, 0, c.shares()[0], "a draining replica takes nothing the others hold")

		r.g.Resume()
		time.Sleep(20 * time.Second)
		synctest.Wait()
		require.Equal(t, []int{3, 3, 3}, c.shares())
		overlaps, _ := c.led.counts()
		require.Zero(t, overlaps)
	})
}

// A replica that drains alone still leads its leases: after its TTL hold
// it takes back what nobody else took.
func TestDrainAloneLeadsAgainAfterTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, placement.Config{})
		r := c.add()
		c.start(r)
		time.Sleep(time.Second)
		require.Equal(t, []int{2}, c.shares())
		require.NoError(t, r.g.Drain(context.Background()))
		require.Equal(t, []int{0}, c.shares())
		time.Sleep(testTTL + testRetry)
		synctest.Wait()
		require.Equal(t, []int{2}, c.shares(), "no lease is left unheld for long")
	})
}

// Handoff gives one lease to another member; a lease not held here is an
// error naming it.
func TestHandoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c := newCluster(t, 2, placement.Config{})
		c.startBalanced(2, []int{1, 1})
		mine := c.led.runner(0)
		other := c.reps[1-mine]
		err := other.g.Handoff(ctx, c.leases[0])
		require.ErrorContains(t, err, `"job-00" is not held by this replica ("`+other.holder)
		require.NoError(t, c.reps[mine].g.Handoff(ctx, c.leases[0]))
		time.Sleep(testRetry)
		synctest.Wait()
		require.Equal(t, other.id, c.led.runner(0), "the other member took it")
		overlaps, _ := c.led.counts()
		require.Zero(t, overlaps)
	})
}

// With NoBalance the members are listed but the first replica keeps every
// lease, until it drains.
func TestNoBalanceIsFirstCome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, placement.Config{NoBalance: true})
		c.startStaggered(3, 5*time.Second, []int{3, 0, 0})
		time.Sleep(20 * time.Second)
		synctest.Wait()
		require.Equal(t, []int{3, 0, 0}, c.shares(), "and keeps them")
		require.Equal(t, []string{"replica-0", "replica-1", "replica-2"}, holders(c.reps[2].g.Members()))

		require.NoError(t, c.reps[0].g.Drain(context.Background()), "Drain still works")
		time.Sleep(testRetry)
		synctest.Wait()
		shares := c.shares()
		require.Equal(t, 0, shares[0], "%v", shares)
		require.Equal(t, 3, shares[1]+shares[2], "%v", shares)
		overlaps, _ := c.led.counts()
		require.Zero(t, overlaps)
	})
}

// Members lists the live members with their leases and since when;
// Waiting, for a lease, every other live member.
func TestMembersAndWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, placement.Config{})
		begin := time.Now()
		for range 3 {
			c.start(c.add())
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		ms := c.reps[0].g.Members()
		require.Equal(t, []string{"replica-0", "replica-1", "replica-2"}, holders(ms))
		var all []string
		for i, m := range ms {
			require.Equal(t, i == 0, m.Self)
			require.False(t, m.Draining)
			require.Len(t, m.Leases, 1, "%+v", m)
			require.WithinDuration(t, begin, m.Since, time.Second)
			all = append(all, m.Leases...)
			for _, h := range []string{"replica-0", "replica-1", "replica-2"} {
				if h != m.Holder {
					require.Contains(t, c.reps[0].g.Waiting(m.Leases[0]), h)
				}
			}
			require.Len(t, c.reps[0].g.Waiting(m.Leases[0]), 2)
		}
		slices.Sort(all)
		require.Equal(t, c.leases, all)
		require.Nil(t, c.reps[0].g.Waiting("no such lease"))

		c.stop(c.reps[2])
		time.Sleep(testRetry)
		require.Equal(t, []string{"replica-0", "replica-1"}, holders(c.reps[0].g.Members()), "a member that left is gone at the next read")
	})
}

// A replica that finds every seat taken still counts itself and takes the
// seat that frees.
func TestFullSeats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, placement.Config{Seats: 1})
		a, b := c.add(), c.add()
		c.start(a)
		c.start(b)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		require.Equal(t, []string{"replica-0"}, holders(a.g.Members()), "b is seatless: a does not see it")
		require.Equal(t, []string{"replica-0", "replica-1"}, holders(b.g.Members()), "b counts itself")
		c.stop(a)
		time.Sleep(2 * testRetry)
		synctest.Wait()
		l, err := c.mem.Get(context.Background(), "leaderaware.group/app/seat/0")
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(l.Holder, "replica-1@"), l.Holder)
		require.Equal(t, []int{0, 2}, c.shares())
	})
}

// Bad values give errors that name them; Start twice and after Close too.
func TestConfigErrors(t *testing.T) {
	s := elector.NewMemoryStore()
	for _, tc := range []struct {
		cfg  placement.Config
		want string
	}{
		{placement.Config{}, "Config.Name is empty"},
		{placement.Config{Name: "a\x00b"}, `Config.Name: elector: lease name "a\x00b" has a non-printable character`},
		{placement.Config{Name: strings.Repeat("n", 240)}, "at most 229 fit in its seat names (64 seats)"},
		{placement.Config{Name: "app", Seats: -1}, "Config.Seats -1 is out of range"},
		{placement.Config{Name: "app", Seats: 5000}, "Config.Seats 5000 is out of range"},
		{placement.Config{Name: "app", TTL: time.Millisecond}, "Config.TTL 1ms is out of range"},
		{placement.Config{Name: "app", RetryInterval: -time.Second}, "Config.RetryInterval -1s is out of range"},
		{placement.Config{Name: "app", RetryInterval: 10 * time.Second}, "Config.RetryInterval 10s is out of range; use 1ms to TTL/2 (7.5s)"},
		{placement.Config{Name: "app", Holder: "a\nb"}, `Config.Holder: elector: holder "a\nb" has a non-printable character`},
		{placement.Config{Name: "app", Holder: strings.Repeat("h", 250)}, "with the join time its seat records, at most 241 fit"},
	} {
		_, err := placement.New(s, tc.cfg)
		require.ErrorContains(t, err, tc.want, "%+v", tc.cfg)
	}
	_, err := placement.New(nil, placement.Config{Name: "app"})
	require.ErrorContains(t, err, "nil Store")

	g, err := placement.New(s, placement.Config{Name: "app", Holder: "me"})
	require.NoError(t, err)
	_, err = g.Elector("job", elector.Config{Holder: "you"})
	require.ErrorContains(t, err, `lease "job": Config.Holder "you" is not the group's holder "me"`)
	_, err = g.Elector("job", elector.Config{Placer: otherPlacer{}})
	require.ErrorContains(t, err, "Config.Placer is set to placement_test.otherPlacer")
	_, err = g.Elector("leaderaware.group/x", elector.Config{})
	require.ErrorContains(t, err, `lease name "leaderaware.group/x" starts with "leaderaware.group/"`)
	_, err = g.Elector("", elector.Config{})
	require.ErrorContains(t, err, "lease name is empty")
	_, err = g.Elector("job", elector.Config{TTL: time.Millisecond})
	require.ErrorContains(t, err, "Config.TTL 1ms is below the floor")
	e, err := g.Elector("job", elector.Config{Holder: "me"})
	require.NoError(t, err)
	require.Equal(t, "me", e.Config().Holder)
	require.Equal(t, elector.Placer(g), e.Config().Placer)
	_, err = g.Elector("job", elector.Config{})
	require.ErrorContains(t, err, `lease "job" is already in group "app"`)

	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		g, err := placement.New(elector.NewMemoryStore(), placement.Config{Name: "app", Logger: discard})
		require.NoError(t, err)
		canceled, cancel := context.WithCancel(ctx)
		cancel()
		require.ErrorIs(t, g.Start(canceled), context.Canceled, "Start is bounded by its ctx")
		require.NoError(t, g.Start(ctx), "and may be called again")
		require.ErrorContains(t, g.Start(ctx), `group "app" started twice`)
		require.NoError(t, g.Close(ctx))
		require.NoError(t, g.Close(ctx), "Close is idempotent")
		require.ErrorContains(t, g.Start(ctx), "after Close")
		require.Zero(t, g.Hold("job"), "a closed group holds nothing back")
	})
}

type otherPlacer struct{}

func (otherPlacer) Hold(string) time.Duration                 { return 0 }
func (otherPlacer) Lead(string, elector.Term) <-chan struct{} { return nil }

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// A member logs its join, drain and leave at Info, and each yield at
// Debug.
func TestLogs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var buf logbuf.Buffer
		g, err := placement.New(elector.NewMemoryStore(), placement.Config{Name: "logs", Holder: "a", TTL: testTTL, RetryInterval: testRetry,
			Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		require.NoError(t, err)
		e, err := g.Elector("job", elector.Config{})
		require.NoError(t, err)
		require.NoError(t, g.Start(ctx))
		term, err := e.Campaign(ctx)
		require.NoError(t, err)
		go func() {
			<-term.(elector.Yielder).Yield()
			_ = term.Resign(ctx)
		}()
		require.NoError(t, g.Drain(ctx))
		require.NoError(t, g.Close(ctx))
		var msgs []string
		for _, rec := range buf.Records(t) {
			msg := rec["level"].(string) + " " + rec["msg"].(string)
			if why, ok := rec["why"]; ok {
				msg += " " + why.(string) + " " + rec["lease"].(string)
			}
			msgs = append(msgs, msg)
		}
		require.Equal(t, []string{
			"INFO placement: joined group",
			"INFO placement: draining",
			"INFO placement: left group",
			"DEBUG placement: yield drain job",
			"INFO placement: drained",
		}, msgs)
	})
}

// countingStore counts the bulk reads and single reads of its Store.
type countingStore struct {
	*crashstore.Store
	bulk, gets atomic.Int64
}

func (s *countingStore) GetMany(ctx context.Context, names []string) ([]elector.Lease, error) {
	s.bulk.Add(1)
	return s.Store.GetMany(ctx, names)
}

func (s *countingStore) Get(ctx context.Context, name string) (elector.Lease, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, name)
}

// A group reads its seats and leases in one bulk read per RetryInterval
// (jittered), however many leases it has.
func TestOneReadPerInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := &countingStore{Store: crashstore.New(elector.NewMemoryStore())}
		g, err := placement.New(s, placement.Config{Name: "app", TTL: testTTL, RetryInterval: testRetry, Logger: discard})
		require.NoError(t, err)
		for i := range 50 {
			_, err := g.Elector(fmt.Sprintf("job-%02d", i), elector.Config{})
			require.NoError(t, err)
		}
		require.NoError(t, g.Start(ctx))
		begin := s.bulk.Load()
		const span = 20 * testRetry
		time.Sleep(span)
		reads := s.bulk.Load() - begin
		require.GreaterOrEqual(t, reads, int64(span/testRetry), "at least one read per RetryInterval")
		require.LessOrEqual(t, reads, int64(2*span/testRetry)+1, "at most one per half RetryInterval (the jitter)")
		require.Zero(t, s.gets.Load(), "no single reads")
		require.NoError(t, g.Close(ctx))
	})
}
