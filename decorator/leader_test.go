package decorator_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

// newLeaders records what OnNewLeader reports, as "holder/token" ("-"
// when free).
type newLeaders struct {
	mu  sync.Mutex
	got []string
}

func (r *newLeaders) hooks() decorator.Hooks {
	return decorator.Hooks{OnNewLeader: func(l elector.Lease) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if l.Holder == "" {
			r.got = append(r.got, "-")
			return
		}
		r.got = append(r.got, fmt.Sprintf("%s/%d", l.Holder, l.Token))
	}}
}

func (r *newLeaders) all() []string {
	synctest.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// waitingLines returns the "waiting for lease" lines of buf.
func waitingLines(buf *syncBuffer) []string {
	synctest.Wait()
	var ws []string
	for _, l := range lines(buf.String()) {
		if msg, ok := strings.CutPrefix(l, "level=INFO msg=\"waiting for lease "); ok {
			ws = append(ws, msg)
		}
	}
	return ws
}

// watched is a decorated job of holder with an OnNewLeader hook and a
// logger, started while x holds the lease.
type watched struct {
	mem     *elector.MemoryStore
	x       elector.Lease
	leaders newLeaders
	buf     syncBuffer
	inner   *fakeJob
	job     decorator.Job
}

func startWatched(t *testing.T, holder string) *watched {
	w := &watched{mem: elector.NewMemoryStore(), inner: &fakeJob{}}
	var err error
	w.x, err = w.mem.TryAcquire(t.Context(), leaseName, "x", testConfig.TTL, elector.Lease{})
	require.NoError(t, err)
	w.job = decorator.Decorate[decorator.Job](w.inner, newElector(t, w.mem, holder),
		decorator.WithHooks(w.leaders.hooks()), decorator.WithLogger(textLogger(&w.buf, slog.LevelInfo)))
	require.NoError(t, w.job.Start(t.Context()))
	return w
}

// TestOnNewLeaderOnAFollower: a replica that waits is told of each new
// holder once, and logs it once, not on renewals.
func TestOnNewLeaderOnAFollower(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		w := startWatched(t, "b")
		mem, r, buf, job := w.mem, &w.leaders, &w.buf, w.job
		time.Sleep(time.Second)
		x, err := mem.Renew(ctx, w.x, testConfig.TTL)
		require.NoError(t, err)
		time.Sleep(time.Second)
		y, err := mem.TryAcquire(ctx, leaseName, "y", testConfig.TTL, x) // takes x over
		require.NoError(t, err)
		for range 3 {
			time.Sleep(time.Second)
			y, err = mem.Renew(ctx, y, testConfig.TTL)
			require.NoError(t, err)
		}
		assert.Equal(t, []string{"x/1", fmt.Sprintf("y/%d", y.Token)}, r.all())
		assert.Equal(t, []string{
			`job, held by x (token 1)" job=*decorator_test.fakeJob lease=job holder=b`,
			fmt.Sprintf(`job, held by y (token %d)" job=*decorator_test.fakeJob lease=job holder=b`, y.Token),
		}, waitingLines(buf))
		require.NoError(t, job.Stop(ctx))
		require.NoError(t, mem.Release(ctx, y))
		time.Sleep(time.Second)
		assert.Len(t, r.all(), 2, "nothing after Stop")
	})
}

// TestOnNewLeaderOnTheLeader: a replica is told of its own term at once,
// and, while it leads, of the term that replaces it; it logs only the
// holders that are not itself.
func TestOnNewLeaderOnTheLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		w := startWatched(t, "a")
		mem, r, buf, inner, job, x := w.mem, &w.leaders, &w.buf, w.inner, w.job, w.x
		synctest.Wait()
		assert.Equal(t, []string{"x/1"}, r.all())
		require.NoError(t, mem.Release(ctx, x))
		synctest.Wait()
		require.True(t, inner.running())
		a, err := mem.Get(ctx, leaseName)
		require.NoError(t, err)
		assert.Equal(t, []string{"x/1", "-", fmt.Sprintf("a/%d", a.Token)}, r.all())
		time.Sleep(3 * testConfig.RetryInterval) // renewals
		a, err = mem.Get(ctx, leaseName)
		require.NoError(t, err)
		y, err := mem.TryAcquire(ctx, leaseName, "y", testConfig.TTL, a) // as if a's TTL had run out
		require.NoError(t, err)
		synctest.Wait()
		assert.Equal(t, []string{"x/1", "-", fmt.Sprintf("a/%d", a.Token), fmt.Sprintf("y/%d", y.Token)}, r.all())
		assert.Equal(t, []string{
			`job, held by x (token 1)" job=*decorator_test.fakeJob lease=job holder=a`,
			fmt.Sprintf(`job, held by y (token %d)" job=*decorator_test.fakeJob lease=job holder=a`, y.Token),
		}, waitingLines(buf))
		require.NoError(t, job.Stop(ctx))
	})
}
