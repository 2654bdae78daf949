package tests

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// event is one line a leaderproc printed, stamped when the test read it.
type event struct {
	kind   string // START, STOP or EXIT
	holder string
	token  uint64
	at     time.Time
}

// cluster runs leaderproc processes and checks, on every event, that no two
// of them run the job at once.
type cluster struct {
	t      *testing.T
	args   []string // common flags: store and timings
	events chan event

	mu      sync.Mutex
	procs   map[string]*proc
	running string // holder whose job runs, "" if none
	// overlaps are STARTs read while another job ran, until that job's
	// STOP shows whether it stopped before the START was printed: lines of
	// two processes are read by two goroutines, so a handoff's START may
	// be read before the STOP printed ahead of it.
	overlaps []overlap
	frozen   map[string]bool // holders stopped by SIGSTOP (true: while their job ran): their jobs cannot run
	wg       sync.WaitGroup
}

// overlap is a START read while the running holder's job had not stopped.
type overlap struct {
	start   event
	running string
}

// proc is one leaderproc.
type proc struct {
	cmd     *exec.Cmd
	started time.Time     // when the test started it
	exited  chan struct{} // closed once it has exited and its output was read
}

func newCluster(t *testing.T, args ...string) *cluster {
	c := &cluster{t: t, args: args, events: make(chan event, 100), procs: make(map[string]*proc), frozen: make(map[string]bool)}
	t.Cleanup(c.stopAll)
	t.Cleanup(func() {
		for _, o := range c.overlaps {
			t.Errorf("two leaders: %s started (token %d) while %s ran, which never stopped", o.start.holder, o.start.token, o.running)
		}
	})
	return c
}

func (c *cluster) start(holder string) {
	c.t.Helper()
	cmd := exec.Command(leaderproc, append([]string{"-holder", holder}, c.args...)...)
	cmd.SysProcAttr = dieWithParent()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	p := &proc{cmd: cmd, started: time.Now(), exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.procs[holder] = p
	c.mu.Unlock()
	c.wg.Go(func() {
		defer close(p.exited)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.record(sc.Text())
		}
		_ = cmd.Wait()
		if s := stderr.String(); s != "" {
			c.t.Logf("%s stderr:\n%s", holder, s)
		}
	})
}

// startedAt returns when the test started holder's process.
func (c *cluster) startedAt(holder string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[holder].started
}

// kill sends SIGKILL to holder's process and waits until it has exited, so
// that the store holds its last write.
func (c *cluster) kill(holder string) {
	c.t.Helper()
	c.signal(holder, syscall.SIGKILL)
	c.mu.Lock()
	exited := c.procs[holder].exited
	c.mu.Unlock()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		c.t.Fatalf("%s still running 10s after SIGKILL", holder)
	}
}

func (c *cluster) record(line string) {
	f := strings.Fields(line)
	if len(f) < 2 {
		c.t.Errorf("unexpected line %q", line)
		return
	}
	ev := event{kind: f[0], holder: f[1], at: time.Now()}
	if len(f) >= 3 {
		ev.token, _ = strconv.ParseUint(f[2], 10, 64)
	}
	if len(f) == 4 { // the time the process printed it
		if ns, err := strconv.ParseInt(f[3], 10, 64); err == nil {
			ev.at = time.Unix(0, ns)
		}
	}
	c.mu.Lock()
	switch ev.kind {
	case "START":
		if _, frozen := c.frozen[c.running]; c.running != "" && !frozen {
			c.overlaps = append(c.overlaps, overlap{start: ev, running: c.running})
		}
		c.running = ev.holder
	case "STOP":
		if c.running == ev.holder {
			c.running = ""
		}
		c.overlaps = slices.DeleteFunc(c.overlaps, func(o overlap) bool {
			if o.running != ev.holder {
				return false
			}
			if ev.at.After(o.start.at) {
				c.t.Errorf("two leaders: %s started (token %d) at %s, %v before %s stopped", o.start.holder, o.start.token,
					o.start.at.Format("15:04:05.000"), ev.at.Sub(o.start.at), ev.holder)
			}
			return true
		})
	}
	c.mu.Unlock()
	c.events <- ev
}

// signal sends sig to holder's process; after SIGKILL its job no longer
// runs, and after SIGSTOP it cannot run until SIGCONT.
func (c *cluster) signal(holder string, sig syscall.Signal) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.procs[holder].cmd.Process.Signal(sig); err != nil {
		c.t.Fatalf("signal %v to %s: %v", sig, holder, err)
	}
	switch sig {
	case syscall.SIGKILL:
		if c.running == holder {
			c.running = ""
		}
		delete(c.frozen, holder)
	case syscall.SIGSTOP:
		c.frozen[holder] = c.running == holder
	case syscall.SIGCONT:
		if c.frozen[holder] && c.running != holder {
			c.t.Errorf("%s resumed with its job, while %q leads", holder, c.running)
		}
		delete(c.frozen, holder)
	}
}

// next returns the next event of kind (of any kind if kind is ""), failing
// after timeout.
func (c *cluster) next(kind string, timeout time.Duration) event {
	c.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev := <-c.events:
			if kind == "" || ev.kind == kind {
				return ev
			}
		case <-deadline:
			c.t.Fatalf("no %q event within %v", kind, timeout)
		}
	}
}

// quiet fails if any process starts the job within d.
func (c *cluster) quiet(d time.Duration) {
	c.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev := <-c.events:
			if ev.kind == "START" {
				c.t.Fatalf("%s started (token %d) though the leader is alive", ev.holder, ev.token)
			}
		case <-deadline:
			return
		}
	}
}

// stopAll stops every process gracefully, kills those still running after
// 10 s, and waits for their readers.
func (c *cluster) stopAll() {
	c.mu.Lock()
	for h := range c.frozen { // a frozen process would not handle SIGTERM
		_ = c.procs[h].cmd.Process.Kill()
	}
	c.mu.Unlock()
	c.each(func(cmd *exec.Cmd) { _ = cmd.Process.Signal(syscall.SIGTERM) })
	drained := make(chan struct{})
	go func() {
		for range c.events { // keep readers from blocking until they exit
		}
		close(drained)
	}()
	exited := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		c.t.Errorf("processes still running 10s after SIGTERM; killing them")
		c.each(func(cmd *exec.Cmd) { _ = cmd.Process.Kill() })
		<-exited
	}
	close(c.events)
	<-drained
}

func (c *cluster) each(fn func(*exec.Cmd)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		fn(p.cmd)
	}
}

func timingArgs(ttl, renew, retry time.Duration) []string {
	return []string{"-ttl", ttl.String(), "-renew", renew.String(), "-retry", retry.String()}
}

// leaseReader reads the current lease of the cluster's lease name from the
// store, in the test process, within ctx.
type leaseReader func(ctx context.Context) (elector.Lease, error)

// failoverBounds are the timings of runFailover's processes.
const (
	foTTL   = 1500 * time.Millisecond
	foRenew = 500 * time.Millisecond
	foRetry = 500 * time.Millisecond
	// foMargin covers process scheduling and the race detector.
	foMargin = time.Second
	// foSlack covers the millisecond truncation of Written and the
	// granularity of the clocks: the lower bounds are safety, so it is
	// small.
	foSlack = 10 * time.Millisecond
)

// runFailover runs candidates of one lease and checks, with margin, the
// bounds of the lease model (see DESIGN.md, "The lease model" and "Fast
// failover"):
//
//  1. a frozen leader (SIGSTOP: alive, but it renews no more) is replaced by
//     a candidate that watched it no sooner than TTL after its last
//     renewal, and no later than TTL + RetryInterval (+ margin) after it;
//  2. a crashed leader (SIGKILL) is replaced within the same bounds, or,
//     if deathDetected (SQLite on Linux: the holder's lock on its liveness
//     byte goes with its process), within the margin of the kill;
//  3. a leader stopped gracefully hands off in milliseconds;
//  4. a candidate that starts fresh while the leader is frozen waits one
//     TTL from its start even when the lease is already older than that:
//     it never saw the lease renewed, so it must watch it for a whole TTL;
//  5. if deathDetected, a candidate that starts fresh after the leader
//     died takes over at once.
//
// Tokens grow at every step. read gives a frozen leader's last renewal: the
// Written time of its lease (the writer's clock is this host's; PostgreSQL
// runs on this host in CI).
func runFailover(t *testing.T, read leaseReader, deathDetected bool, storeArgs ...string) {
	c := newCluster(t, append(storeArgs, timingArgs(foTTL, foRenew, foRetry)...)...)
	for _, h := range []string{"a", "b", "c", "d"} {
		c.start(h)
	}
	first := c.next("START", 15*time.Second)
	c.quiet(2 * time.Second) // everyone is up and campaigning; nobody else leads

	// 1. Frozen leader: the watching candidates take over TTL after the
	// last renewal they saw.
	renewed := c.freeze(first.holder, read)
	second := c.next("START", foTTL+foRetry+foMargin+time.Second)
	took := second.at.Sub(renewed)
	checkElapsed(t, "frozen leader", second.holder, took)
	checkToken(t, first, second)
	c.kill(first.holder)

	// 2. Crashed leader.
	killedAt := time.Now()
	c.kill(second.holder)
	var crashRenewed time.Time
	if !deathDetected { // the lease stays the dead leader's until its TTL has passed
		crashRenewed = lastRenewal(t, read, second.holder)
	}
	third := c.next("START", foTTL+foRetry+foMargin+time.Second)
	crash := third.at.Sub(killedAt)
	if deathDetected {
		t.Logf("crash failover: %v after the kill (bound %v)", crash, foMargin)
		if crash > foMargin {
			t.Errorf("crash failover took %v after the kill: the death of the holder should end its lease at once", crash)
		}
	} else {
		crash = third.at.Sub(crashRenewed)
		checkElapsed(t, "crashed leader", third.holder, crash)
	}
	checkToken(t, second, third)

	// 3. Graceful: the release wakes the last candidate at once.
	c.signal(third.holder, syscall.SIGTERM)
	// The new leader's START may be read before the STOP printed ahead of
	// it (each process's lines have a reader of their own): take both, in
	// either order.
	var stopped, fourth event
	deadline := time.Now().Add(5 * time.Second)
	for stopped.kind == "" || fourth.kind == "" {
		switch ev := c.next("", time.Until(deadline)); {
		case ev.kind == "STOP" && ev.holder == third.holder:
			stopped = ev
		case ev.kind == "STOP":
			t.Fatalf("%s stopped, want %s", ev.holder, third.holder)
		case ev.kind == "START":
			fourth = ev
		}
	}
	handoff := fourth.at.Sub(stopped.at)
	t.Logf("graceful handoff: %v", handoff)
	if handoff > time.Second {
		t.Errorf("graceful handoff took %v, more than 1s", handoff)
	}
	checkToken(t, third, fourth)

	// 4. A fresh candidate, started once the frozen leader's lease is
	// already older than its TTL, waits a TTL from its start.
	renewed = c.freeze(fourth.holder, read)
	time.Sleep(time.Until(renewed.Add(foTTL + 200*time.Millisecond)))
	c.start("e")
	fifth := c.next("START", foTTL+foRetry+foMargin+5*time.Second)
	fresh := fifth.at.Sub(c.startedAt("e"))
	t.Logf("fresh candidate: took over %v after it started, %v after the last renewal (bounds [%v, %v] after its start)",
		fresh, fifth.at.Sub(renewed), foTTL, foTTL+foRetry+foMargin)
	if fresh < foTTL {
		t.Errorf("a fresh candidate took over %v after it started, before watching the lease for its TTL %v", fresh, foTTL)
	}
	if fresh > foTTL+foRetry+foMargin {
		t.Errorf("a fresh candidate took over %v after it started, more than TTL + RetryInterval + %v", fresh, foMargin)
	}
	checkToken(t, fourth, fifth)
	c.kill(fourth.holder)

	// 5. A fresh candidate after a crash.
	freshDead := time.Duration(0)
	if deathDetected {
		c.kill(fifth.holder)
		c.start("f")
		sixth := c.next("START", foTTL+foRetry+foMargin+5*time.Second)
		freshDead = sixth.at.Sub(c.startedAt("f"))
		t.Logf("fresh candidate after a crash: took over %v after it started (bound %v)", freshDead, foMargin)
		if freshDead > foMargin {
			t.Errorf("a fresh candidate took over %v after it started though the holder had died: the death should end its lease at once", freshDead)
		}
		checkToken(t, fifth, sixth)
	}
	fmt.Printf("failover %s: frozen leader replaced %v after its last renewal, crash %v, graceful %v, fresh candidate %v (after a crash: %v)\n",
		storeArgs[0], took.Round(time.Millisecond), crash.Round(time.Millisecond), handoff.Round(time.Millisecond),
		fresh.Round(time.Millisecond), freshDead.Round(time.Millisecond))
}

// checkElapsed checks that holder took a lease over took after the last
// renewal of its holder, which stopped renewing: no sooner than TTL, no
// later than TTL + RetryInterval + margin.
func checkElapsed(t *testing.T, what, holder string, took time.Duration) {
	t.Helper()
	t.Logf("%s: replaced %v after its last renewal (bounds [%v, %v])", what, took, foTTL, foTTL+foRetry+foMargin)
	if took < foTTL-foSlack {
		t.Errorf("%s: %s took over %v after the last renewal, before its TTL %v had passed: two leaders were possible", what, holder, took, foTTL)
	}
	if took > foTTL+foRetry+foMargin {
		t.Errorf("%s: replaced %v after the last renewal, more than TTL + RetryInterval + %v", what, took, foMargin)
	}
}

func checkToken(t *testing.T, before, after event) {
	t.Helper()
	if after.token <= before.token {
		t.Errorf("token %d (%s) after %d (%s): tokens must increase", after.token, after.holder, before.token, before.holder)
	}
}

// freeze stops holder's process with SIGSTOP and returns the last renewal
// of its lease. A process stopped inside a write of the SQLite file would
// hold the file's lock, and nobody could take over until it resumes (see
// sqlitelease's documentation): then the read times out, and freeze resumes
// it and tries again a little later.
func (c *cluster) freeze(holder string, read leaseReader) time.Time {
	c.t.Helper()
	for try := 0; ; try++ {
		c.signal(holder, syscall.SIGSTOP)
		ctx, cancel := context.WithTimeout(c.t.Context(), time.Second)
		l, err := read(ctx)
		cancel()
		if err == nil {
			if l.Holder != holder {
				c.t.Fatalf("the lease is %s's (token %d), want the frozen leader %s's", l.Holder, l.Token, holder)
			}
			return l.Written
		}
		if try == 4 {
			c.t.Fatalf("read the lease of frozen %s: %v", holder, err)
		}
		c.t.Logf("read the lease of frozen %s: %v; resuming it to try again", holder, err)
		c.signal(holder, syscall.SIGCONT)
		time.Sleep(200 * time.Millisecond)
	}
}

// lastRenewal returns the Written time of the lease, which must be
// holder's.
func lastRenewal(t *testing.T, read leaseReader, holder string) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	l, err := read(ctx)
	if err != nil {
		t.Fatalf("read the lease: %v", err)
	}
	if l.Holder != holder {
		t.Fatalf("the lease is %s's (token %d), want %s's", l.Holder, l.Token, holder)
	}
	return l.Written
}
