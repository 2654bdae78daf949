package placement_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/crashstore"
	"github.com/leaderaware/leaderaware/placement"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Short timings for synctest bubbles.
const (
	testTTL   = 3 * time.Second
	testRetry = 500 * time.Millisecond
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// plainStore hides every optional interface of its Store: no bulk read, no
// batch renewal, no notifications.
type plainStore struct{ elector.Store }

// cluster is a group of replicas, each with its own Store value over one
// MemoryStore (so its own renewal schedule and watch, as a process has),
// each running one decorated job per lease.
type cluster struct {
	t      *testing.T
	mem    *elector.MemoryStore
	leases []string
	cfg    placement.Config
	plain  bool // replicas see the store without its optional interfaces
	led    ledger
	reps   []*replica
}

type replica struct {
	id     int
	holder string
	store  *crashstore.Store
	g      *placement.Group
	jobs   []decorator.Job
	closed bool
}

func newCluster(t *testing.T, leases int, cfg placement.Config) *cluster {
	c := &cluster{t: t, mem: elector.NewMemoryStore(), cfg: cfg}
	for i := range leases {
		c.leases = append(c.leases, fmt.Sprintf("job-%02d", i))
	}
	c.led.running = make([]map[int]bool, leases)
	for i := range c.led.running {
		c.led.running[i] = map[int]bool{}
	}
	t.Cleanup(c.shutdown)
	return c
}

// add makes the next replica, with its group and jobs, started or not.
func (c *cluster) add() *replica {
	c.t.Helper()
	r := &replica{id: len(c.reps), holder: fmt.Sprintf("replica-%d", len(c.reps))}
	r.store = crashstore.New(c.mem)
	var s elector.Store = r.store
	if c.plain {
		s = plainStore{r.store}
	}
	cfg := c.cfg
	if cfg.Name == "" {
		cfg.Name = "app"
	}
	cfg.Holder, cfg.TTL, cfg.RetryInterval, cfg.Logger = r.holder, testTTL, testRetry, discard
	g, err := placement.New(s, cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	r.g = g
	for i, name := range c.leases {
		e, err := g.Elector(name, elector.Config{TTL: testTTL, RetryInterval: testRetry})
		if err != nil {
			c.t.Fatal(err)
		}
		j := &ledgerJob{led: &c.led, lease: i, rep: r.id}
		r.jobs = append(r.jobs, decorator.Decorate[decorator.Job](j, e, decorator.WithLogger(discard)))
	}
	c.reps = append(c.reps, r)
	return r
}

// start starts r's group, then its jobs.
func (c *cluster) start(r *replica) {
	c.t.Helper()
	ctx := context.Background()
	if err := r.g.Start(ctx); err != nil {
		c.t.Fatal(err)
	}
	for _, j := range r.jobs {
		if err := j.Start(ctx); err != nil {
			c.t.Fatal(err)
		}
	}
}

// startBalanced starts n replicas at once and checks that, once settled,
// they lead want leases each.
func (c *cluster) startBalanced(n int, want []int) { c.startStaggered(n, 0, want) }

// startStaggered starts n replicas gap apart and checks that, 10s after the
// last, they lead want leases each.
func (c *cluster) startStaggered(n int, gap time.Duration, want []int) {
	c.t.Helper()
	for i := range n {
		if i > 0 {
			time.Sleep(gap)
		}
		c.start(c.add())
	}
	time.Sleep(10 * time.Second)
	synctest.Wait()
	require.Equal(c.t, want, c.shares())
}

// stop stops r's jobs and closes its group.
func (c *cluster) stop(r *replica) {
	c.t.Helper()
	if r.closed {
		return
	}
	r.closed = true
	ctx := context.Background()
	for _, j := range r.jobs {
		if err := j.Stop(ctx); err != nil && !r.store.Crashed() {
			c.t.Errorf("stop a job of %s: %v", r.holder, err)
		}
	}
	if err := r.g.Close(ctx); err != nil && !r.store.Crashed() {
		c.t.Errorf("close %s: %v", r.holder, err)
	}
}

func (c *cluster) shutdown() {
	for _, r := range c.reps {
		c.stop(r)
	}
}

// shares returns how many leases each replica's inner jobs run now.
func (c *cluster) shares() []int {
	c.led.mu.Lock()
	defer c.led.mu.Unlock()
	out := make([]int, len(c.reps))
	for _, reps := range c.led.running {
		for rep := range reps {
			out[rep]++
		}
	}
	return out
}

// ledger counts the inner jobs running per lease, and the starts while
// another ran (two leaders).
type ledger struct {
	mu       sync.Mutex
	running  []map[int]bool // per lease, the replicas whose inner job runs
	overlaps int
	handoffs int
	last     map[int]int // per lease, the replica that started it last
	started  []time.Time // per lease, its last start
	starts   int         // inner Starts, of every lease
}

func (l *ledger) start(lease, rep int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.running[lease]) > 0 {
		l.overlaps++
	}
	l.running[lease][rep] = true
	l.starts++
	if l.last == nil {
		l.last = map[int]int{}
		l.started = make([]time.Time, len(l.running))
	}
	if prev, ok := l.last[lease]; ok && prev != rep {
		l.handoffs++
	}
	l.last[lease] = rep
	l.started[lease] = time.Now()
}

// starts returns how many inner Starts the cluster has made.
func (c *cluster) starts() int {
	c.led.mu.Lock()
	defer c.led.mu.Unlock()
	return c.led.starts
}

func (l *ledger) stop(lease, rep int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.running[lease], rep)
}

// runner returns the replica whose inner job of lease runs, or -1.
func (l *ledger) runner(lease int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for rep := range l.running[lease] {
		return rep
	}
	return -1
}

func (l *ledger) counts() (overlaps, handoffs int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.overlaps, l.handoffs
}

type ledgerJob struct {
	led        *ledger
	lease, rep int
}

func (j *ledgerJob) Start(context.Context) error { j.led.start(j.lease, j.rep); return nil }
func (j *ledgerJob) Stop(context.Context) error  { j.led.stop(j.lease, j.rep); return nil }

// holders returns the holders of ms.
func holders(ms []placement.Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Holder)
	}
	return out
}
