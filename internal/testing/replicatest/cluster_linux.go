//go:build linux

package replicatest

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

	"github.com/leaderaware/leaderaware/internal/testing/helperproc"
)

// line is one line a replica printed (see helperproc.Replica), stamped with the
// replica's clock (this host's, as the test's) as it printed it: the test
// reads the processes' lines later, and not in the order they were printed. Or DEAD: the test saw the process end
// (stamped when the test killed it, if it did: no code of a process runs
// once SIGKILL reached it).
type line struct {
	at     time.Time
	kind   string
	holder string
	token  uint64
	n      int64
	text   string
}

// pause is one SIGSTOP..SIGCONT (or SIGKILL) of a process, by the test's
// clock; end is zero while it lasts.
type pause struct {
	holder     string
	start, end time.Time
}

// cluster runs replicas as child processes and records their lines.
type cluster struct {
	t    *testing.T
	args []string // flags common to every replica

	mu     sync.Mutex
	procs  map[string]*proc // by holder
	lines  []line           // in the order read
	pauses []pause
	wg     sync.WaitGroup
	once   sync.Once
}

// proc is one replica process.
type proc struct {
	cmd    *exec.Cmd
	stderr *capBuffer
	exited chan struct{} // closed once it has exited and its output was read
	killed time.Time     // when the test sent SIGKILL
	paused bool
}

// newCluster returns a cluster of replicas started with args; the test's
// cleanup kills every process still running.
func newCluster(t *testing.T, args ...string) *cluster {
	c := &cluster{t: t, args: args, procs: make(map[string]*proc)}
	t.Cleanup(c.stopAll)
	return c
}

// start starts a replica named holder, in a process group of its own, that
// the kernel kills if the test binary dies.
func (c *cluster) start(holder string) {
	c.t.Helper()
	cmd := helperproc.Command(c.t, "replica", append([]string{"-holder", holder}, c.args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	p := &proc{cmd: cmd, stderr: &capBuffer{max: 64 << 10}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", holder, err)
	}
	c.mu.Lock()
	c.procs[holder] = p
	c.mu.Unlock()
	c.wg.Go(func() {
		defer close(p.exited)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.record(holder, sc.Text())
		}
		err := cmd.Wait()
		c.mu.Lock()
		defer c.mu.Unlock()
		at := time.Now()
		if !p.killed.IsZero() {
			at = p.killed
		}
		c.lines = append(c.lines, line{at: at, kind: "DEAD", holder: holder, text: fmt.Sprint(err)})
	})
}

func (c *cluster) record(holder, text string) {
	l := line{at: time.Now(), holder: holder, text: text}
	stamp, rest, _ := strings.Cut(text, " ")
	nanos, err := strconv.ParseInt(stamp, 10, 64)
	if err == nil {
		l.at, l.text = time.Unix(0, nanos), rest
	}
	f := strings.Fields(l.text)
	if len(f) > 0 {
		l.kind = f[0]
	}
	if err != nil || len(f) < 2 || f[1] != holder {
		l.kind = "BAD"
	}
	switch l.kind {
	case "START", "STOP", "WROTE", "REFUSED":
		if l.token, err = strconv.ParseUint(field(f, 2), 10, 64); err != nil {
			l.kind = "BAD"
		}
	}
	if l.kind == "WROTE" {
		l.n, _ = strconv.ParseInt(field(f, 3), 10, 64)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, l)
}

func field(f []string, i int) string {
	if i < len(f) {
		return f[i]
	}
	return ""
}

// signal sends sig to holder's process and records pauses and kills.
func (c *cluster) signal(holder string, sig syscall.Signal) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.procs[holder]
	now := time.Now()
	if err := p.cmd.Process.Signal(sig); err != nil {
		c.t.Errorf("signal %v to %s: %v", sig, holder, err)
		return
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
		c.pauses = append(c.pauses, pause{holder: holder, start: now})
	case syscall.SIGCONT, syscall.SIGKILL:
		if sig == syscall.SIGKILL && p.killed.IsZero() {
			p.killed = now
		}
		if p.paused {
			p.paused = false
			for i := range c.pauses {
				if c.pauses[i].holder == holder && c.pauses[i].end.IsZero() {
					c.pauses[i].end = now
				}
			}
		}
	}
}

// kill sends SIGKILL to holder's process and waits until it has exited.
func (c *cluster) kill(holder string) {
	c.t.Helper()
	c.signal(holder, syscall.SIGKILL)
	select {
	case <-c.exited(holder):
	case <-time.After(10 * time.Second):
		c.t.Fatalf("%s still running 10s after SIGKILL", holder)
	}
}

func (c *cluster) exited(holder string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[holder].exited
}

// next returns the first line from index from on that matches, and its
// index, waiting up to timeout for it.
func (c *cluster) next(from int, timeout time.Duration, match func(line) bool) (line, int, bool) {
	deadline := time.Now().Add(timeout)
	for {
		c.mu.Lock()
		for i := from; i < len(c.lines); i++ {
			if match(c.lines[i]) {
				l := c.lines[i]
				c.mu.Unlock()
				return l, i, true
			}
		}
		from = len(c.lines)
		c.mu.Unlock()
		if time.Now().After(deadline) {
			return line{}, 0, false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// is matches lines of kind, and of holder unless it is "".
func is(kind, holder string) func(line) bool {
	return func(l line) bool { return l.kind == kind && (holder == "" || l.holder == holder) }
}

// snapshot returns the lines and pauses so far.
func (c *cluster) snapshot() ([]line, []pause) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]line(nil), c.lines...), append([]pause(nil), c.pauses...)
}

// stopAll kills every process still running and waits for its lines. It
// runs at cleanup, and may run before.
func (c *cluster) stopAll() {
	c.once.Do(func() {
		c.mu.Lock()
		for h, p := range c.procs {
			select {
			case <-p.exited:
				continue
			default:
			}
			if p.killed.IsZero() {
				p.killed = time.Now()
			}
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) // its process group
			if p.paused {
				p.paused = false
				for i := range c.pauses {
					if c.pauses[i].holder == h && c.pauses[i].end.IsZero() {
						c.pauses[i].end = p.killed
					}
				}
			}
		}
		c.mu.Unlock()
		c.wg.Wait()
		if c.t.Failed() {
			c.logStderr()
		}
	})
}

// logStderr logs what the processes wrote to stderr (the decorator's
// warnings), and their ERROR lines.
func (c *cluster) logStderr() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for h, p := range c.procs {
		if s := p.stderr.String(); s != "" {
			c.t.Logf("%s stderr:\n%s", h, s)
		}
	}
	for _, l := range c.lines {
		if l.kind == "ERROR" || l.kind == "BAD" {
			c.t.Logf("%s: %s", l.holder, l.text)
		}
	}
}

// jobRun is one term's run of a replica's inner job: from its START line
// to its STOP line, or to its process's death; end is zero if it still ran
// when the lines were taken.
type jobRun struct {
	holder     string
	token      uint64
	start, end time.Time
}

// jobRuns returns the job runs that lines show.
func jobRuns(lines []line) []jobRun {
	var all []jobRun
	open := make(map[string]int) // holder → index in all of its open run
	for _, l := range lines {
		switch i, ok := open[l.holder]; {
		case l.kind == "START":
			open[l.holder] = len(all)
			all = append(all, jobRun{holder: l.holder, token: l.token, start: l.at})
		case ok && (l.kind == "STOP" && l.token == all[i].token || l.kind == "DEAD"):
			all[i].end = l.at
			delete(open, l.holder)
		}
	}
	return all
}

// overlaps reports the job runs of different terms that were under way at
// once, but for those where the earlier run's process was paused from
// before the later run started, and its run ended at most resumeStop after
// the pause did (a frozen process cannot stop its job; resumed, it must,
// at once). It returns the violations and the excused overlaps.
func overlaps(rs []jobRun, pauses []pause, resumeStop time.Duration) (violations, excused []string) {
	forever := time.Unix(1<<40, 0)
	for _, a := range rs {
		aEnd := a.end
		if aEnd.IsZero() {
			aEnd = forever
		}
		for _, b := range rs {
			if a.token == b.token || b.start.Before(a.start) || !b.start.Before(aEnd) {
				continue
			}
			what := fmt.Sprintf("%s started token %d at %s while %s's job of token %d (started %s) ran until %s",
				b.holder, b.token, b.start.Format(timeFormat), a.holder, a.token, a.start.Format(timeFormat), fmtEnd(a.end))
			excuse := ""
			for _, p := range pauses {
				if p.holder == a.holder && p.start.Before(b.start) && !p.end.IsZero() && !aEnd.After(p.end.Add(resumeStop)) {
					excuse = fmt.Sprintf("; %s was paused from %s to %s", a.holder, p.start.Format(timeFormat), p.end.Format(timeFormat))
				}
			}
			if excuse != "" {
				excused = append(excused, what+excuse)
			} else {
				violations = append(violations, "two leaders: "+what)
			}
		}
	}
	return violations, excused
}

const timeFormat = "15:04:05.000"

func fmtEnd(t time.Time) string {
	if t.IsZero() {
		return "the end"
	}
	return t.Format(timeFormat)
}

// capBuffer keeps the first max bytes written to it.
type capBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (b *capBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - len(b.b); room > 0 {
		b.b = append(b.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *capBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.b)
}
