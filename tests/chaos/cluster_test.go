//go:build linux

package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/internal/testing/helperproc"
)

// timings are those of every process; the bounds derive from them.
var timings = struct {
	ttl, renew, retry, every, suspend time.Duration
}{ttl: 1500 * time.Millisecond, renew: 500 * time.Millisecond, retry: 500 * time.Millisecond,
	every: 50 * time.Millisecond, suspend: 3 * time.Second}

// The chaos schedule.
const (
	minDwell        = 200 * time.Millisecond // a leader writes at least this long before the next action...
	maxDwell        = time.Second            // ...and at most this long
	minPause        = 500 * time.Millisecond // a paused leader sleeps at least this long...
	maxPause        = 3 * time.Second        // ...and at most this long
	minRestartDelay = 100 * time.Millisecond // a killed, stopped or exited process comes back after at least this...
	maxRestartDelay = time.Second            // ...and at most this
	minStepEvery    = 500 * time.Millisecond // a random process's wall clock is stepped ±1h at least this often...
	maxStepEvery    = 2 * time.Second        // ...and at most this often
	wallStep        = time.Hour              // the size of a step
	burstKills      = 3                      // a burst kills this many leaders in a row, each as soon as it is elected
	minLive         = 2                      // live, unpaused processes never fewer than this
	keptLease       = time.Second            // a paused leader still leading this long after SIGCONT kept its lease
	recoverTimeout  = 20 * time.Second       // liveness: a new leader within this after an action
	exitTimeout     = 10 * time.Second       // a SIGTERMed process exits within this
	stderrCap       = 64 << 10               // bytes of a process's stderr kept
	pollEvery       = 10 * time.Millisecond  // how often the schedule looks at the cluster
)

// proc is one incarnation of a helper in mode chaos.
type proc struct {
	slot   int
	holder string
	step   time.Duration // its wall-clock step at start
	cmd    *exec.Cmd
	stderr *capBuffer
	exited chan struct{} // closed after Wait

	// guarded by cluster.mu
	inode    uint64        // of the SQLite file it opened (OPEN line)
	opened   bool          // its OPEN line came: it handles the clock signals
	stepped  time.Duration // its wall-clock step now, as its last STEP line said
	paused   bool
	gone     bool      // SIGKILL or SIGTERM sent, or exited
	killed   bool      // SIGKILL sent (see sigkill)...
	killedAt time.Time // ...then: stamped before it was sent
	fileGone bool      // it printed GONE: its file was deleted
	running  *jobRun
	xrunning map[string]*jobRun // the other leases' runs (-leases), by lease
}

// restart is a process to start again in slot once after has passed and
// waitFor (if any) has exited.
type restart struct {
	slot    int
	after   time.Time
	waitFor *proc     // a SIGTERMed process...
	killAt  time.Time // ...that gets SIGKILL if it has not exited by then
}

// suspension is one simulated suspend (SIGPWR) of a leader.
type suspension struct {
	holder      string
	token       uint64        // the term it led when the suspend was simulated
	at          time.Time     // its SUSPEND line
	stopped     time.Duration // from the suspend to the term's STOP line; 0 if none came
	writesAfter int           // WROTE lines of the term after the SUSPEND line
}

// event is one line of a process or one action of the schedule, stamped
// when the test read or took it.
type event struct {
	at   time.Time
	text string
}

// deleteFunc copies the rows of the SQLite file and deletes it with its -wal
// and -shm files, then creates a new file there. It returns the copied rows
// and the new file's inode.
type deleteFunc func(ctx context.Context, file int) (rows []row, inode uint64, err error)

// cluster runs the processes of one test, reads their lines and runs the
// chaos schedule. Only the test goroutine starts, signals and restarts
// processes; one goroutine per process reads its stdout and waits for it.
type cluster struct {
	t    *testing.T
	args []string // common flags: store, table, lease name, timings
	rnd  *rand.Rand

	pending  []restart       // owned by the test goroutine
	offsets  []time.Duration // wall-clock step of each slot's "host"; owned by the test goroutine
	nextStep time.Time       // owned by the test goroutine
	roll     *roller         // the rollback fault, if the store has one; owned by the test goroutine

	mu          sync.Mutex
	closing     bool
	all         []*proc
	slots       []*proc
	gens        []int
	selfExited  []*proc // exited on their own, to restart
	leader      *proc   // holder of the last START without its STOP; nil if none or it died
	leaderToken uint64
	leaderSeq   int // the leader's START number
	startSeq    int // START lines so far
	leaderSince time.Time
	leaderWrote bool // the leader's term has committed a row
	inodes      []uint64
	starts      []started
	startInode  []uint64 // the inode of each start's process (SQLite)
	runs        []*jobRun
	stopAt      map[string]time.Time // holder/token → STOP line
	pauses      []pause
	wrote       []wrote
	suspends    []*suspension
	deletions   []time.Time // of the file, or its replacement by a restore
	restores    int         // of those, replacements
	rollbacks   []time.Time // when the test wrote a saved lease row back
	copied      []row       // rows of deleted files
	refused     int
	zombies     int      // zombie writes refused
	zombieLines []string // zombie writes that committed
	errLines    []string // ERROR lines and unexpected output
	goneLines   int
	kills       int
	bursts      int
	stops       int
	steps       int // steps sent
	stepLines   int // STEP lines read
	restarts    int
	others      map[string]*otherLease // the other leases of a balanced run (-leases), by name
	yields      int                    // YIELD lines: terms of any lease the group asked to end
	timeline    []event                // every line and every action, in the order the test saw them

	wg       sync.WaitGroup
	stopOnce sync.Once
}

// newCluster starts procs processes. inode is the SQLite file's (0 on
// PostgreSQL).
func newCluster(t *testing.T, procs int, seed uint64, inode uint64, args ...string) *cluster {
	c := &cluster{
		t:       t,
		args:    args,
		rnd:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		slots:   make([]*proc, procs),
		gens:    make([]int, procs),
		offsets: make([]time.Duration, procs),
		inodes:  []uint64{inode},
		stopAt:  make(map[string]time.Time),
		others:  make(map[string]*otherLease),
	}
	c.nextStep = time.Now().Add(c.randBetween(minStepEvery, maxStepEvery))
	t.Cleanup(c.stopAll)
	for slot := range procs {
		c.start(slot)
	}
	return c
}

// start starts a new incarnation of the process in slot, with the slot's
// wall-clock step.
func (c *cluster) start(slot int) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return
	}
	c.gens[slot]++
	holder := fmt.Sprintf("p%d.%d", slot, c.gens[slot])
	step := c.offsets[slot]
	cmd := helperproc.Command(c.t, "chaos", append([]string{"-holder", holder, "-wallstep", step.String()}, c.args...)...)
	// If the test binary dies, its children die too, paused or not.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	p := &proc{slot: slot, holder: holder, step: step, stepped: step, cmd: cmd, stderr: &capBuffer{max: stderrCap}, exited: make(chan struct{}),
		xrunning: make(map[string]*jobRun)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", holder, err)
	}
	c.all = append(c.all, p)
	c.slots[slot] = p
	c.timeline = append(c.timeline, event{time.Now(), fmt.Sprintf("test: started %s (wall clock step %v)", holder, step)})
	c.wg.Go(func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.record(p, sc.Text())
		}
		dead := time.Now() // its stdout ended: it is exiting, or gone
		err := cmd.Wait()
		c.mu.Lock()
		defer c.mu.Unlock()
		c.timeline = append(c.timeline, event{dead, fmt.Sprintf("test: %s exited (%v)", p.holder, err)})
		if p.running != nil {
			p.running.end, p.running.dead, p.running.how = dead, dead, "exited"
			if p.killed && p.killedAt.Before(dead) {
				p.running.end, p.running.how = p.killedAt, "killed"
			}
			p.running = nil
		}
		for lease, r := range p.xrunning {
			r.end, r.dead, r.how = dead, dead, "exited"
			if p.killed && p.killedAt.Before(dead) {
				r.end, r.how = p.killedAt, "killed"
			}
			delete(p.xrunning, lease)
		}
		if !p.gone && !c.closing {
			if !p.fileGone {
				c.errLines = append(c.errLines, fmt.Sprintf("%s exited on its own: %v", p.holder, err))
			}
			c.selfExited = append(c.selfExited, p)
		}
		p.gone = true
		if c.leader == p {
			c.leader = nil
		}
		close(p.exited)
	})
}

// record handles one line of p's output.
func (c *cluster) record(p *proc, line string) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timeline = append(c.timeline, event{now, line})
	f := strings.Fields(line)
	if len(f) < 2 || f[1] != p.holder {
		c.errLines = append(c.errLines, fmt.Sprintf("%s: unexpected line %q", p.holder, line))
		return
	}
	num := func(i int) uint64 {
		if i >= len(f) {
			c.errLines = append(c.errLines, fmt.Sprintf("%s: short line %q", p.holder, line))
			return 0
		}
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			c.errLines = append(c.errLines, fmt.Sprintf("%s: bad number in %q", p.holder, line))
		}
		return n
	}
	nanos := func(i int) time.Time { return time.Unix(0, int64(num(i))) }
	switch f[0] {
	case "OPEN":
		p.inode, p.opened = num(2), true
	case "START":
		token := num(2)
		c.startSeq++
		c.starts = append(c.starts, started{holder: p.holder, token: token, at: now, step: p.stepped})
		c.startInode = append(c.startInode, p.inode)
		if !p.gone {
			c.leader, c.leaderToken, c.leaderSeq, c.leaderSince, c.leaderWrote = p, token, c.startSeq, now, false
		}
	case "RUN":
		r := &jobRun{holder: p.holder, token: num(2), start: nanos(3), how: "running"}
		c.runs = append(c.runs, r)
		p.running = r
	case "HALT":
		if r := p.running; r != nil && r.token == num(2) {
			r.stopCalled, r.end, r.how = nanos(3), nanos(4), "halt"
			p.running = nil
		} else {
			c.errLines = append(c.errLines, fmt.Sprintf("%s: HALT without its RUN: %q", p.holder, line))
		}
	case "WROTE":
		token := num(2)
		c.wrote = append(c.wrote, wrote{holder: p.holder, token: token, n: int64(num(3))})
		if c.leader == p && c.leaderToken == token {
			c.leaderWrote = true
		}
		for _, s := range c.suspends {
			if s.holder == p.holder && s.token == token {
				s.writesAfter++
			}
		}
	case "STOP":
		token := num(2)
		c.stopAt[fmt.Sprintf("%s/%d", p.holder, token)] = now
		for _, s := range c.suspends {
			if s.holder == p.holder && s.token == token && s.stopped == 0 {
				s.stopped = now.Sub(s.at)
			}
		}
		if c.leader == p && c.leaderToken == token {
			c.leader = nil
		}
	case "SUSPEND":
		if token := num(2); token != 0 {
			c.suspends = append(c.suspends, &suspension{holder: p.holder, token: token, at: now})
		} else {
			c.errLines = append(c.errLines, fmt.Sprintf("%s: no suspend simulated: its job did not run: %q", p.holder, line))
		}
	case "STEP":
		c.stepLines++
		if len(f) >= 3 {
			if d, err := time.ParseDuration(f[2]); err == nil {
				p.stepped = d
			}
		}
	case "GONE":
		p.fileGone = true
		c.goneLines++
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
	case "XRUN", "XHALT", "YIELD":
		c.recordOther(p, f, line, num, nanos)
	case "EXIT":
	default:
		c.errLines = append(c.errLines, fmt.Sprintf("%s: unexpected line %q", p.holder, line))
	}
}

// waitUntil polls cond (called with c.mu held) until it holds or timeout
// passes, starting the due restarts and clock steps meanwhile.
func (c *cluster) waitUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		c.restartDue()
		c.stepDue()
		c.rollDue()
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

// restartDue starts the processes whose restart is due, and schedules the
// restart of those that exited on their own.
func (c *cluster) restartDue() {
	now := time.Now()
	c.mu.Lock()
	for _, p := range c.selfExited {
		c.pending = append(c.pending, restart{slot: p.slot, after: now.Add(c.randBetween(minRestartDelay, maxRestartDelay))})
	}
	c.selfExited = nil
	c.mu.Unlock()
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
					c.sigkill(r.waitFor)
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

// stepDue steps the wall clock of a random live process by ±1h when it is
// time. Each slot stands for a host whose clock keeps its step across
// restarts; steps keep it within ±1h of the true time.
func (c *cluster) stepDue() {
	wallStep := *flagStep
	if wallStep <= 0 || time.Now().Before(c.nextStep) {
		return
	}
	c.nextStep = time.Now().Add(c.randBetween(minStepEvery, maxStepEvery))
	c.mu.Lock()
	defer c.mu.Unlock()
	var live []*proc
	for _, p := range c.slots {
		if p != nil && !p.gone && p.opened {
			live = append(live, p)
		}
	}
	if len(live) == 0 {
		return
	}
	p := live[c.rnd.IntN(len(live))]
	d := wallStep
	switch off := c.offsets[p.slot]; {
	case off > 0:
		d = -wallStep
	case off == 0 && c.rnd.IntN(2) == 0:
		d = -wallStep
	}
	sig := syscall.SIGUSR1
	if d < 0 {
		sig = syscall.SIGUSR2
	}
	c.signal(p, sig)
	c.offsets[p.slot] += d
	c.steps++
}

func (c *cluster) randBetween(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(c.rnd.Int64N(int64(hi-lo)+1))
}

// signal sends sig to p. The caller holds c.mu.
func (c *cluster) signal(p *proc, sig syscall.Signal) {
	c.timeline = append(c.timeline, event{time.Now(), fmt.Sprintf("test: %v to %s", sig, p.holder)})
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		c.errLines = append(c.errLines, fmt.Sprintf("signal %v to %s: %v", sig, p.holder, err))
	}
}

// sigkill sends SIGKILL to p, dated before it is sent: on a loaded machine
// the process may die, and another take over, before the sender runs
// again. The date ends p's job run (see jobRun). The caller holds c.mu.
func (c *cluster) sigkill(p *proc) {
	p.gone, p.killed, p.killedAt = true, true, time.Now()
	c.signal(p, syscall.SIGKILL)
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
// then crashes, pauses, suspends or stops it, or kills a burst of leaders,
// and waits until a new leader is elected (or, after a pause, the old one
// kept its lease). One action at a time, on a leader whose term has rows,
// so that each leaderless gap between two terms' rows has one cause. Once,
// at a random time in the middle of the run, the action is the deletion of
// the SQLite file instead, if del is not nil. Clock steps of random
// processes run all along. At the end it waits for a leader, so that the
// last action's gap is measured too.
func (c *cluster) run(d time.Duration, del, restore deleteFunc) {
	began := time.Now()
	end := began.Add(d)
	deleteAt := began.Add(time.Duration(float64(d) * (0.35 + 0.3*c.rnd.Float64())))
	var restoreAt []time.Time // twice, away from the deletion
	if restore != nil {
		restoreAt = []time.Time{began.Add(time.Duration(float64(d) * (0.15 + 0.15*c.rnd.Float64()))),
			began.Add(time.Duration(float64(d) * (0.7 + 0.15*c.rnd.Float64())))}
	}
	var settledAt time.Time // when the last action's effect was over
	for time.Now().Before(end) {
		dwell := c.randBetween(minDwell, maxDwell)
		var (
			target *proc
			seq    int
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
			target, seq, token = c.leader, c.leaderSeq, c.leaderToken
			return time.Since(since) >= dwell
		})
		if !ok {
			c.t.Errorf("no leader for %v (live processes: %d)", recoverTimeout, c.liveCount())
			return
		}
		if !time.Now().Before(end) {
			break
		}
		var kind string
		switch {
		case len(restoreAt) > 0 && !time.Now().Before(restoreAt[0]):
			kind = "restore of the file"
			c.deleteFile(restore, "moved a backup over")
			restoreAt = restoreAt[1:]
		case del != nil && !time.Now().Before(deleteAt):
			kind = "deletion of the file"
			c.deleteFile(del, "deleted")
			del = nil
		default:
			kind = c.act(target)
		}
		recovered := c.waitUntil(recoverTimeout, func() bool {
			if c.leader != nil && c.leaderSeq > seq {
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

// act crashes, pauses, suspends or gracefully stops the leader p, or kills
// a burst of leaders starting with p, and returns which.
func (c *cluster) act(p *proc) string {
	switch x := c.rnd.Float64(); {
	case x < 0.25:
		c.kill(p)
		return "kill"
	case x < 0.35:
		c.burst(p)
		return "burst of kills"
	case x < 0.65:
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
	case x < 0.8:
		c.mu.Lock()
		c.signal(p, syscall.SIGPWR)
		c.mu.Unlock()
		return "simulated suspend"
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

// kill crashes p and schedules its restart.
func (c *cluster) kill(p *proc) {
	c.mu.Lock()
	c.sigkill(p)
	if c.leader == p {
		c.leader = nil
	}
	c.kills++
	c.mu.Unlock()
	c.pending = append(c.pending, restart{slot: p.slot, after: time.Now().Add(c.randBetween(minRestartDelay, maxRestartDelay))})
}

// burst kills p, then each next leader the moment its START line comes,
// burstKills leaders in all, while enough processes stay live.
func (c *cluster) burst(p *proc) {
	c.mu.Lock()
	c.bursts++
	c.mu.Unlock()
	for i := 0; ; i++ {
		c.mu.Lock()
		seq := c.startSeq
		c.mu.Unlock()
		c.kill(p)
		if i == burstKills-1 {
			return
		}
		var next *proc
		ok := c.waitUntil(recoverTimeout, func() bool {
			if c.leader == nil || c.leaderSeq <= seq || c.leader.gone {
				return false
			}
			next = c.leader
			return true
		})
		c.mu.Lock()
		enough := ok && c.liveOthers(next) >= minLive
		c.mu.Unlock()
		if !enough {
			return
		}
		p = next
	}
}

// deleteFile deletes (or, as what says, replaces) the SQLite file under the
// running processes with del, keeping its rows, and records the new file.
func (c *cluster) deleteFile(del deleteFunc, what string) {
	c.mu.Lock()
	file := len(c.inodes)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, inode, err := del(ctx, file-1)
	if err != nil {
		c.t.Errorf("%s the SQLite file: %v", what, err)
		return
	}
	// Dated once done: del waits for the file's write lock, and the old
	// file's last row may commit meanwhile; the new file, which del creates
	// last, gets its first row after that.
	at := time.Now()
	c.mu.Lock()
	if what != "deleted" {
		c.restores++
	}
	c.timeline = append(c.timeline, event{at, fmt.Sprintf("test: %s the SQLite file (%d rows copied), new file's inode %d", what, len(rows), inode)})
	c.copied = append(c.copied, rows...)
	c.deletions = append(c.deletions, at)
	c.inodes = append(c.inodes, inode)
	c.mu.Unlock()
}

// between returns the timeline from from to to.
func (c *cluster) between(from, to time.Time) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var window []event
	for _, e := range c.timeline {
		if !e.at.Before(from) && !e.at.After(to) {
			window = append(window, e)
		}
	}
	slices.SortStableFunc(window, func(a, b event) int { return a.at.Compare(b.at) })
	lines := make([]string, len(window))
	for i, e := range window {
		lines[i] = e.at.Format(timeFormat) + " " + e.text
	}
	return lines
}

func (c *cluster) liveCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.liveOthers(nil)
}

// log returns what the run left for the checker, the rows aside. Call it
// after stopAll.
func (c *cluster) log() runLog {
	c.mu.Lock()
	defer c.mu.Unlock()
	in := runLog{pauses: c.pauses, deletions: c.deletions, wrote: c.wrote, rollbacks: c.rollbacks}
	for i, s := range c.starts {
		s.file = c.fileOf(c.startInode[i])
		in.starts = append(in.starts, s)
	}
	for _, r := range c.runs {
		in.runs = append(in.runs, *r)
	}
	return in
}

// fileOf returns the number of the file with inode: 0 for the first,
// 1 for the one created after the first deletion... The caller holds c.mu.
func (c *cluster) fileOf(inode uint64) int {
	for i := len(c.inodes) - 1; i >= 0; i-- {
		if c.inodes[i] == inode {
			return i
		}
	}
	c.errLines = append(c.errLines, fmt.Sprintf("a process opened an unknown file (inode %d)", inode))
	return -1
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
			c.sigkill(p)
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
