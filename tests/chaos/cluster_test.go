//go:build linux

package chaos

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// timings are those of every chaosproc; the gap bounds derive from them.
var timings = struct {
	ttl, renew, retry, every time.Duration
}{ttl: 1500 * time.Millisecond, renew: 500 * time.Millisecond, retry: 500 * time.Millisecond, every: 50 * time.Millisecond}

// The chaos schedule.
const (
	minDwell        = 200 * time.Millisecond // a leader writes at least this long before the next action...
	maxDwell        = time.Second            // ...and at most this long
	minPause        = 500 * time.Millisecond // a paused leader sleeps at least this long...
	maxPause        = 3 * time.Second        // ...and at most this long
	minRestartDelay = 100 * time.Millisecond // a killed or stopped process comes back after at least this...
	maxRestartDelay = time.Second            // ...and at most this
	minLive         = 2                      // live, unpaused processes never fewer than this
	keptLease       = time.Second            // a paused leader still leading this long after SIGCONT kept its lease
	recoverTimeout  = 20 * time.Second       // liveness: a new leader within this after an action
	exitTimeout     = 10 * time.Second       // a SIGTERMed process exits within this
	stderrCap       = 64 << 10               // bytes of a process's stderr kept
	pollEvery       = 10 * time.Millisecond  // how often the schedule looks at the cluster
)

// proc is one incarnation of a chaosproc.
type proc struct {
	slot   int
	holder string
	cmd    *exec.Cmd
	stderr *capBuffer
	exited chan struct{} // closed after Wait

	// guarded by cluster.mu
	paused bool
	gone   bool // SIGKILL or SIGTERM sent, or exited
}

// restart is a process to start again in slot once after has passed and
// waitFor (if any) has exited.
type restart struct {
	slot    int
	after   time.Time
	waitFor *proc     // a SIGTERMed process...
	killAt  time.Time // ...that gets SIGKILL if it has not exited by then
}

// cluster runs the chaosprocs of one test, reads their lines and runs the
// chaos schedule. Only the test goroutine starts, signals and restarts
// processes; one goroutine per process reads its stdout and waits for it.
type cluster struct {
	t    *testing.T
	args []string // common flags: store, table, lease name, timings
	rnd  *rand.Rand

	pending []restart // owned by the test goroutine

	mu          sync.Mutex
	closing     bool
	all         []*proc
	slots       []*proc
	gens        []int
	leader      *proc // holder of the last START without its STOP; nil if none or it died
	leaderToken uint64
	leaderSince time.Time
	leaderWrote bool // the leader's term has committed a row
	starts      []started
	pauses      []pause
	refused     int
	zombies     int      // zombie writes refused
	zombieLines []string // zombie writes that committed
	errLines    []string // ERROR lines and unexpected output
	kills       int
	stops       int
	restarts    int

	wg       sync.WaitGroup
	stopOnce sync.Once
}

func newCluster(t *testing.T, procs int, seed uint64, args ...string) *cluster {
	c := &cluster{
		t:     t,
		args:  args,
		rnd:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		slots: make([]*proc, procs),
		gens:  make([]int, procs),
	}
	t.Cleanup(c.stopAll)
	for slot := range procs {
		c.start(slot)
	}
	return c
}

// start starts a new incarnation of the process in slot.
func (c *cluster) start(slot int) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return
	}
	c.gens[slot]++
	holder := fmt.Sprintf("p%d.%d", slot, c.gens[slot])
	cmd := exec.Command(chaosproc, append([]string{"-holder", holder}, c.args...)...)
	// If the test binary dies, its children die too, paused or not.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	p := &proc{slot: slot, holder: holder, cmd: cmd, stderr: &capBuffer{max: stderrCap}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", holder, err)
	}
	c.all = append(c.all, p)
	c.slots[slot] = p
	c.wg.Go(func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.record(p, sc.Text())
		}
		_ = cmd.Wait()
		c.mu.Lock()
		p.gone = true
		if c.leader == p {
			c.leader = nil
		}
		c.mu.Unlock()
		close(p.exited)
	})
}

// record handles one line of p's output.
func (c *cluster) record(p *proc, line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := strings.Fields(line)
	if len(f) < 2 || f[1] != p.holder {
		c.errLines = append(c.errLines, fmt.Sprintf("%s: unexpected line %q", p.holder, line))
		return
	}
	var token uint64
	if len(f) >= 3 && f[0] != "ERROR" {
		token, _ = strconv.ParseUint(f[2], 10, 64)
	}
	switch f[0] {
	case "START":
		c.starts = append(c.starts, started{holder: p.holder, token: token})
		if !p.gone {
			c.leader, c.leaderToken, c.leaderSince, c.leaderWrote = p, token, time.Now(), false
		}
	case "WROTE":
		if c.leader == p && c.leaderToken == token {
			c.leaderWrote = true
		}
	case "STOP":
		if c.leader == p && c.leaderToken == token {
			c.leader = nil
		}
	case "REFUSED":
		c.refused++
	case "ZOMBIE":
		if len(f) == 4 && f[3] == "refused" {
			c.zombies++
		} else {
			c.zombieLines = append(c.zombieLines, line)
		}
	case "ERROR":
		c.errLines = append(c.errLines, line)
	case "EXIT":
	default:
		c.errLines = append(c.errLines, fmt.Sprintf("%s: unexpected line %q", p.holder, line))
	}
}

// waitUntil polls cond (called with c.mu held) until it holds or timeout
// passes, starting the due restarts meanwhile.
func (c *cluster) waitUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		c.restartDue()
		c.mu.Lock()
		ok := cond()
		c.mu.Unlock()
		if ok {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(pollEvery)
	}
}

// sleep waits d, starting the due restarts meanwhile.
func (c *cluster) sleep(d time.Duration) { c.waitUntil(d, func() bool { return false }) }

// restartDue starts the processes whose restart is due.
func (c *cluster) restartDue() {
	now := time.Now()
	kept := c.pending[:0]
	for _, r := range c.pending {
		due := !now.Before(r.after)
		if due && r.waitFor != nil {
			select {
			case <-r.waitFor.exited:
			default:
				due = false
				if !now.Before(r.killAt) {
					c.mu.Lock()
					c.errLines = append(c.errLines, fmt.Sprintf("%s did not exit within %v of SIGTERM: killed", r.waitFor.holder, exitTimeout))
					c.signal(r.waitFor, syscall.SIGKILL)
					c.mu.Unlock()
					r.killAt = now.Add(time.Hour)
				}
			}
		}
		if !due {
			kept = append(kept, r)
			continue
		}
		c.start(r.slot)
		c.mu.Lock()
		c.restarts++
		c.mu.Unlock()
	}
	c.pending = kept
}

func (c *cluster) randBetween(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(c.rnd.Int64N(int64(hi-lo)+1))
}

// signal sends sig to p. The caller holds c.mu.
func (c *cluster) signal(p *proc, sig syscall.Signal) {
	if err := p.cmd.Process.Signal(sig); err != nil {
		c.errLines = append(c.errLines, fmt.Sprintf("signal %v to %s: %v", sig, p.holder, err))
	}
}

// liveOthers counts the processes other than p that are live and not
// paused. The caller holds c.mu.
func (c *cluster) liveOthers(p *proc) int {
	n := 0
	for _, q := range c.slots {
		if q != p && q != nil && !q.gone && !q.paused {
			n++
		}
	}
	return n
}

// run runs the chaos schedule for d. It waits for a leader whose term has
// written a row (its WROTE line came) and that has led for a random dwell,
// then crashes, pauses or stops it, and waits until a new leader is elected
// (or, after a pause, the old one kept its lease). One action at a time, on
// a leader whose term has rows, so that each leaderless gap between two
// terms' rows has one cause. At the end it waits for a leader, so that the
// last action's gap is measured too.
func (c *cluster) run(d time.Duration) {
	end := time.Now().Add(d)
	var settledAt time.Time // when the last action's effect was over
	for time.Now().Before(end) {
		dwell := c.randBetween(minDwell, maxDwell)
		var (
			target *proc
			token  uint64
		)
		ok := c.waitUntil(recoverTimeout, func() bool {
			if c.leader == nil || !c.leaderWrote || c.leader.paused || c.leader.gone || c.liveOthers(c.leader) < minLive {
				return false
			}
			since := c.leaderSince
			if settledAt.After(since) {
				since = settledAt
			}
			target, token = c.leader, c.leaderToken
			return time.Since(since) >= dwell
		})
		if !ok {
			c.t.Errorf("no leader for %v (live processes: %d)", recoverTimeout, c.liveCount())
			return
		}
		if !time.Now().Before(end) {
			break
		}
		kind := c.act(target)
		recovered := c.waitUntil(recoverTimeout, func() bool {
			if c.leader != nil && c.leaderToken > token {
				return true // a new term
			}
			return kind == "pause" && c.leader == target && time.Since(c.pauses[len(c.pauses)-1].end) >= keptLease
		})
		if !recovered {
			c.t.Errorf("no new leader within %v after the %s of %s (token %d)", recoverTimeout, kind, target.holder, token)
		}
		settledAt = time.Now()
	}
	if !c.waitUntil(recoverTimeout, func() bool { return c.leader != nil }) {
		c.t.Errorf("no leader at the end of the run")
	}
	c.sleep(maxDwell) // let the last leader write
}

// act crashes, pauses or gracefully stops the leader p, and returns which.
func (c *cluster) act(p *proc) string {
	switch x := c.rnd.Float64(); {
	case x < 0.35:
		c.mu.Lock()
		c.signal(p, syscall.SIGKILL)
		p.gone = true
		if c.leader == p {
			c.leader = nil
		}
		c.kills++
		c.mu.Unlock()
		c.pending = append(c.pending, restart{slot: p.slot, after: time.Now().Add(c.randBetween(minRestartDelay, maxRestartDelay))})
		return "kill"
	case x < 0.8:
		d := c.randBetween(minPause, maxPause)
		c.mu.Lock()
		start := time.Now()
		c.signal(p, syscall.SIGSTOP)
		p.paused = true
		c.mu.Unlock()
		c.sleep(d)
		c.mu.Lock()
		c.signal(p, syscall.SIGCONT)
		p.paused = false
		c.pauses = append(c.pauses, pause{holder: p.holder, start: start, end: time.Now()})
		c.mu.Unlock()
		return "pause"
	default:
		c.mu.Lock()
		c.signal(p, syscall.SIGTERM)
		p.gone = true
		c.stops++
		c.mu.Unlock()
		now := time.Now()
		c.pending = append(c.pending, restart{slot: p.slot, after: now.Add(c.randBetween(minRestartDelay, maxRestartDelay)),
			waitFor: p, killAt: now.Add(exitTimeout)})
		return "stop"
	}
}

func (c *cluster) liveCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.liveOthers(nil)
}

// stopAll resumes every paused process, kills every process and waits for
// them and their readers. It runs at the end of the run and at cleanup; the
// second call does nothing. A graceful stop of a process that did not exit
// in time is killed too.
func (c *cluster) stopAll() {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		c.closing = true
		for _, p := range c.all {
			select {
			case <-p.exited:
				continue
			default:
			}
			if p.paused {
				_ = p.cmd.Process.Signal(syscall.SIGCONT)
				p.paused = false
			}
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			p.gone = true
		}
		c.mu.Unlock()
		c.pending = nil
		c.wg.Wait()
	})
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
