package tests

import (
	"bufio"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
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
	procs   map[string]*exec.Cmd
	running string // holder whose job runs, "" if none
	wg      sync.WaitGroup
}

func newCluster(t *testing.T, args ...string) *cluster {
	c := &cluster{t: t, args: args, events: make(chan event, 100), procs: make(map[string]*exec.Cmd)}
	t.Cleanup(c.stopAll)
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
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.procs[holder] = cmd
	c.mu.Unlock()
	c.wg.Go(func() {
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

func (c *cluster) record(line string) {
	f := strings.Fields(line)
	if len(f) < 2 {
		c.t.Errorf("unexpected line %q", line)
		return
	}
	ev := event{kind: f[0], holder: f[1], at: time.Now()}
	if len(f) == 3 {
		ev.token, _ = strconv.ParseUint(f[2], 10, 64)
	}
	c.mu.Lock()
	switch ev.kind {
	case "START":
		if c.running != "" {
			c.t.Errorf("two leaders: %s started (token %d) while %s runs", ev.holder, ev.token, c.running)
		}
		c.running = ev.holder
	case "STOP":
		if c.running == ev.holder {
			c.running = ""
		}
	}
	c.mu.Unlock()
	c.events <- ev
}

// signal sends sig to holder's process; after SIGKILL its job no longer runs.
func (c *cluster) signal(holder string, sig syscall.Signal) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.procs[holder].Process.Signal(sig); err != nil {
		c.t.Fatalf("signal %v to %s: %v", sig, holder, err)
	}
	if sig == syscall.SIGKILL && c.running == holder {
		c.running = ""
	}
}

// next returns the next event of kind, failing after timeout.
func (c *cluster) next(kind string, timeout time.Duration) event {
	c.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev := <-c.events:
			if ev.kind == kind {
				return ev
			}
		case <-deadline:
			c.t.Fatalf("no %s within %v", kind, timeout)
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
	for _, cmd := range c.procs {
		fn(cmd)
	}
}

func timingArgs(ttl, renew, retry time.Duration) []string {
	return []string{"-ttl", ttl.String(), "-renew", renew.String(), "-retry", retry.String()}
}

// runFailover starts three candidates, crashes the leader, then stops the
// next one gracefully, checking bounds with margin at each step.
func runFailover(t *testing.T, storeArgs ...string) {
	const (
		ttl    = 1500 * time.Millisecond
		renew  = 500 * time.Millisecond
		retry  = 500 * time.Millisecond
		margin = time.Second
	)
	c := newCluster(t, append(storeArgs, timingArgs(ttl, renew, retry)...)...)
	for _, h := range []string{"a", "b", "c"} {
		c.start(h)
	}
	first := c.next("START", 15*time.Second)
	c.quiet(2 * time.Second) // everyone is up and campaigning; nobody else leads

	killedAt := time.Now()
	c.signal(first.holder, syscall.SIGKILL)
	second := c.next("START", ttl+retry+margin+time.Second)
	took := second.at.Sub(killedAt)
	t.Logf("crash failover: %v (bound %v)", took, ttl+retry+margin)
	if took > ttl+retry+margin {
		t.Errorf("crash failover took %v, more than TTL + RetryInterval + %v", took, margin)
	}
	// The dead lease was renewed at most one RenewInterval before the kill.
	if earliest := ttl - renew - 100*time.Millisecond; took < earliest {
		t.Errorf("%s started %v after the crash, before the dead lease could expire (%v)", second.holder, took, earliest)
	}
	if second.token <= first.token {
		t.Errorf("token %d after %d: tokens must increase", second.token, first.token)
	}

	c.signal(second.holder, syscall.SIGTERM)
	stopped := c.next("STOP", 5*time.Second)
	if stopped.holder != second.holder {
		t.Fatalf("%s stopped, want %s", stopped.holder, second.holder)
	}
	third := c.next("START", 5*time.Second)
	handoff := third.at.Sub(stopped.at)
	t.Logf("graceful handoff: %v", handoff)
	if handoff > time.Second {
		t.Errorf("graceful handoff took %v, more than 1s", handoff)
	}
	if third.token <= second.token {
		t.Errorf("token %d after %d: tokens must increase", third.token, second.token)
	}
	fmt.Printf("failover %s: crash %v, graceful %v\n", storeArgs[0], took.Round(time.Millisecond), handoff.Round(time.Millisecond))
}

// uniq returns a string unique to this run, for names in a database that
// outlives the test.
func uniq() string { return strconv.FormatInt(time.Now().UnixNano(), 36) }
