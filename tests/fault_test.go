package tests

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/pgtest"
	"github.com/leaderaware/leaderaware/internal/testing/tcpproxy"
	"github.com/leaderaware/leaderaware/pglease"
)

// TestFaultsPostgres runs a leader and two candidates in this process, each
// a decorated job with a pglease.Store of its own whose every connection
// (lease pool, job pool, release listener) goes through a loopback proxy of
// its own, and puts them through network faults one after the other:
//
//   - freeze: every open connection of every proxy stops forwarding, in
//     both directions, without closing (a black-holed path; new
//     connections pass);
//   - delay: every chunk of data through every proxy waits 50 ms (a slow
//     path, 100 ms and more per round trip, within RenewInterval);
//   - delay past renew: every chunk waits 300 ms (600 ms and more per round
//     trip, longer than a renewal attempt may take): no term can be
//     renewed, so no leader is promised, only never two;
//   - cut: every open connection of every proxy is closed (a restarted
//     middlebox);
//   - leader freeze: the leader's open connections alone are frozen, while
//     the candidates' work (its new connections pass too, so it can still
//     release the lease once its term has expired).
//
// After each fault it waits for a leader that is running its job with a
// term won after the fault, or renewed twice since (a continuing leader),
// and asserts one comes within TTL + RetryInterval + 5 s (except past
// renew); then it lifts the fault. All along, a counter of running inner jobs shared by the three
// asserts that never two run at once.
func TestFaultsPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn, "leaderaware_faults_")
	const (
		ttl    = 2 * time.Second
		renew  = 500 * time.Millisecond
		retry  = 500 * time.Millisecond
		delay  = 50 * time.Millisecond
		stuck  = 300 * time.Millisecond // a round trip longer than renew
		bound  = ttl + retry + 5*time.Second
		name   = "faults"
		stable = time.Second // a leader must renew undisturbed this long before the next fault
	)
	target, err := pgTarget(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// The schema and table first, directly, so that the three stores only
	// read them.
	s0, err := pglease.Open(t.Context(), dsn, pglease.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	s0.Close()

	var (
		running atomic.Int32 // inner jobs between Start and Stop, all candidates together
		rec     = &leaderLog{t: t}
		members []*faultMember
	)
	for _, holder := range []string{"a", "b", "c"} {
		p, err := tcpproxy.New(target)
		if err != nil {
			t.Fatal(err)
		}
		m := &faultMember{holder: holder, proxy: p}
		members = append(members, m)
		t.Cleanup(func() { closeProxy(t, holder, p) })
		pdsn, err := viaProxy(dsn, p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		s, err := pglease.Open(t.Context(), pdsn, pglease.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("close the store of %s: %v", holder, err)
			}
		})
		e, err := elector.New(s, name, elector.Config{TTL: ttl, RenewInterval: renew, RetryInterval: retry, Holder: holder})
		if err != nil {
			t.Fatal(err)
		}
		m.job = decorator.Decorate[decorator.Job](&countingJob{holder: holder, running: &running, log: rec}, e,
			decorator.WithBackoff(100*time.Millisecond, time.Second),
			decorator.WithStopTimeout(5*time.Second),
			decorator.WithHooks(decorator.Hooks{
				OnError: func(_ context.Context, err error) { rec.errorf("%s: %v", holder, err) },
				OnDemoted: func(_ context.Context, term elector.Term, cause error) {
					t.Logf("%s: term of token %d over: %v", holder, term.Token(), cause)
				},
			}))
		if err := m.job.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { // before the store closes and the proxy (cleanups run last first)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := m.job.Stop(ctx); err != nil {
				t.Errorf("stop %s: %v", holder, err)
			}
		})
	}

	// waitLeader waits until a leader runs its job with a term won after
	// since, or renewed at least twice after since, and returns how long
	// after since it saw it. before is the leader's state at since. Each
	// new version it sees is a renewal (versions grow by more than one).
	waitLeader := func(since time.Time, before leaderState, timeout time.Duration) (time.Duration, leaderState, bool) {
		deadline := since.Add(timeout)
		renewals, last := 0, before.version
		for {
			now := time.Now()
			cur := rec.current()
			if cur.term != nil && isOpen(cur.term.Done()) {
				l := cur.term.Lease()
				if l.Token == before.token && l.Version != last {
					renewals, last = renewals+1, l.Version
				}
				if cur.started.After(since) || l.Token == before.token && renewals >= 2 {
					return now.Sub(since), cur, true
				}
			}
			if now.After(deadline) {
				return now.Sub(since), cur, false
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	snapshot := func() leaderState {
		cur := rec.current()
		if cur.term != nil {
			l := cur.term.Lease()
			cur.token, cur.version = l.Token, l.Version
		}
		return cur
	}

	first := time.Now().Add(15 * time.Second)
	for rec.current().term == nil {
		if time.Now().After(first) {
			t.Fatal("no leader within 15s of the start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var results []string
	for _, f := range []struct {
		name         string
		apply, clear func()
		unpromised   bool // no leader is promised during this fault
	}{
		{"freeze", func() { each(members, (*tcpproxy.Proxy).Freeze) }, func() { each(members, (*tcpproxy.Proxy).Thaw) }, false},
		{"delay", delayAll(members, delay), delayAll(members, 0), false},
		{"delay past renew", delayAll(members, stuck), delayAll(members, 0), true},
		{"cut", func() { each(members, (*tcpproxy.Proxy).Cut) }, func() {}, false},
		{"leader freeze", nil, nil, false}, // set below: it needs the leader of the moment
	} {
		// A leader that has renewed undisturbed for a while.
		if _, _, ok := waitLeader(time.Now(), snapshot(), 15*time.Second); !ok {
			t.Fatalf("no steady leader before the %s", f.name)
		}
		time.Sleep(stable)
		before := snapshot()
		if f.name == "leader freeze" {
			var leader *tcpproxy.Proxy
			for _, m := range members {
				if m.holder == before.holder {
					leader = m.proxy
				}
			}
			if leader == nil {
				t.Fatalf("no leader to freeze alone (the leader of the moment: %q)", before.holder)
			}
			f.apply, f.clear = leader.Freeze, leader.Thaw
		}
		at := time.Now()
		f.apply()
		took, after, ok := waitLeader(at, before, bound)
		f.clear()
		if !ok && f.unpromised {
			t.Logf("%s: no leader within %v of the fault (none promised)", f.name, bound)
			results = append(results, fmt.Sprintf("%s: none within %v (none promised)", f.name, bound))
			continue
		}
		if !ok {
			t.Errorf("%s: no leader within %v (TTL + RetryInterval + 5s) of the fault; before it %s led token %d", f.name, bound, before.holder, before.token)
			results = append(results, fmt.Sprintf("%s: none within %v", f.name, bound))
			continue
		}
		how := "a new term"
		if after.term.Token() == before.token {
			how = "the same term, renewed twice"
		}
		t.Logf("%s: leader %s (%s, token %d) %v after the fault; before it, %s led token %d",
			f.name, after.holder, how, after.term.Token(), took.Round(time.Millisecond), before.holder, before.token)
		results = append(results, fmt.Sprintf("%s %v (%s, %s)", f.name, took.Round(time.Millisecond), after.holder, how))
	}
	if _, _, ok := waitLeader(time.Now(), snapshot(), bound); !ok {
		t.Errorf("no leader after the last fault was lifted")
	}
	starts, most := rec.summary()
	if most > 1 {
		t.Errorf("%d inner jobs ran at once", most)
	}
	t.Logf("%d terms, at most %d inner job running at once; %d errors reported", starts, most, rec.errorCount())
	fmt.Printf("faults postgres: time to a leader after each fault: %s; %d terms, never two jobs at once: %v\n",
		strings.Join(results, "; "), starts, most <= 1)
}

// closeProxy lifts p's faults and closes it. Close waits for the proxy's
// goroutines; if it has not returned after 10s, one of them is stuck and
// the test fails, rather than hang until the test binary's timeout.
func closeProxy(t *testing.T, holder string, p *tcpproxy.Proxy) {
	p.Thaw()
	p.Delay(0)
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("close the proxy of %s: %v", holder, err)
		}
	case <-time.After(10 * time.Second):
		// A known way in: a connection that gets data while frozen, and
		// whose other side then closes, leaves the pipe holding the data
		// waiting on the freeze, and Thaw and Cut no longer reach it.
		t.Errorf("the proxy of %s did not close within 10s: one of its pipes is stuck (see tcpproxy's freeze)", holder)
	}
}

// faultMember is one candidate of TestFaultsPostgres.
type faultMember struct {
	holder string
	proxy  *tcpproxy.Proxy
	job    decorator.Job
}

func each(ms []*faultMember, f func(*tcpproxy.Proxy)) {
	for _, m := range ms {
		f(m.proxy)
	}
}

// delayAll returns a function that sets the delay of every member's proxy
// to d.
func delayAll(ms []*faultMember, d time.Duration) func() {
	return func() { each(ms, func(p *tcpproxy.Proxy) { p.Delay(d) }) }
}

// countingJob is an inner job that counts the inner jobs running, all
// candidates together, and fails the test if two run at once.
type countingJob struct {
	holder  string
	running *atomic.Int32
	log     *leaderLog
}

func (j *countingJob) Start(ctx context.Context) error {
	term, ok := elector.TermFromContext(ctx)
	if !ok {
		return fmt.Errorf("no term in the start context")
	}
	n := j.running.Add(1)
	j.log.started(j.holder, term, int(n))
	return nil
}

func (j *countingJob) Stop(context.Context) error {
	j.log.stopped(j.holder)
	j.running.Add(-1)
	return nil
}

// leaderState is the job that runs, with its term and when it started.
type leaderState struct {
	holder         string
	term           elector.Term
	started        time.Time
	token, version uint64 // the term's lease, as of a snapshot
}

// leaderLog records the inner jobs' starts and stops.
type leaderLog struct {
	t *testing.T

	mu     sync.Mutex
	cur    leaderState
	starts int
	most   int // the most inner jobs running at once
	errors int
}

func (l *leaderLog) started(holder string, term elector.Term, running int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if running > 1 {
		other := "another"
		if l.cur.term != nil {
			other = fmt.Sprintf("%s's job (token %d)", l.cur.holder, l.cur.term.Token())
		}
		l.t.Errorf("two leaders: %s started its job (token %d) while %s runs", holder, term.Token(), other)
	}
	l.most = max(l.most, running)
	l.starts++
	l.cur = leaderState{holder: holder, term: term, started: time.Now()}
}

func (l *leaderLog) stopped(holder string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur.holder == holder {
		l.cur = leaderState{}
	}
}

func (l *leaderLog) current() leaderState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

func (l *leaderLog) errorf(format string, args ...any) {
	l.mu.Lock()
	l.errors++
	l.mu.Unlock()
	l.t.Logf(format, args...)
}

func (l *leaderLog) errorCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.errors
}

func (l *leaderLog) summary() (starts, most int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.starts, l.most
}

func isOpen(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

// pgTarget returns the host:port of the server dsn names.
func pgTarget(dsn string) (string, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port)), nil
}

// viaProxy returns dsn with its host and port replaced by addr.
func viaProxy(dsn, addr string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", err
		}
		u.Host = addr
		return u.String(), nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	return dsn + " host=" + host + " port=" + port, nil // later keywords win
}
