package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/internal/testing/logbuf"
	"github.com/leaderaware/leaderaware/statuspage"
)

// asLeaderd is the environment variable that makes the test binary run
// leaderd's main instead of the tests (see TestMain): the tests below run
// real leaderd processes without building another binary.
const asLeaderd = "LEADERD_TEST_AS_LEADERD"

// proc is a leaderd process started by the test, with the default flags
// but its own -db, -holder and -control.
type proc struct {
	holder  string
	control string
	cmd     *exec.Cmd
	out     *logbuf.Buffer
	exited  chan struct{}
	err     error // of Wait, once exited is closed
}

// startProc starts leaderd -db db -holder holder, with its control socket
// in dir, and waits until it logs that it runs. t's cleanup kills it if it
// still runs.
func startProc(t *testing.T, dir, db, holder string) *proc {
	t.Helper()
	p := &proc{holder: holder, control: filepath.Join(dir, holder+".sock"), out: new(logbuf.Buffer), exited: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], "-db", db, "-holder", holder, "-control", p.control)
	p.cmd.Env = append(os.Environ(), asLeaderd+"=1")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	require.NoError(t, p.cmd.Start())
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	require.Eventually(t, func() bool { return strings.Contains(p.out.String(), "leaderd running") }, 30*time.Second, 20*time.Millisecond,
		"%s should start\n%s", holder, p.out)
	return p
}

// interrupt sends SIGINT (Ctrl-C) and waits for a clean exit.
func (p *proc) interrupt(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
	select {
	case <-p.exited:
		require.NoError(t, p.err, "%s should exit 0 after Ctrl-C\n%s", p.holder, p.out)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit 30 s after Ctrl-C\n%s", p.holder, p.out)
	}
}

// storeView is what leaderd status -json says of the store.
type storeView struct {
	Leases  []statuspage.Lease
	Members []statuspage.Member
}

// view runs leaderd status -json -db db in the test process. It may run
// on a goroutine of testify's: it reports errors with t.Errorf.
func view(t *testing.T, db string) storeView {
	var stdout, stderr bytes.Buffer
	var v storeView
	if code := run(context.Background(), []string{"status", "-json", "-db", db}, &stderr, &stdout); code != 0 {
		t.Errorf("leaderd status -json: exit code %d, stderr %q", code, stderr.String())
		return v
	}
	if err := json.Unmarshal(stdout.Bytes(), &v); err != nil {
		t.Errorf("leaderd status -json printed %q: %v", stdout.String(), err)
	}
	return v
}

// lastView keeps the view a condition of Eventually or Never read last,
// for failure messages: those conditions run on goroutines of testify's.
type lastView struct {
	mu sync.Mutex
	v  storeView
}

func (l *lastView) set(v storeView) storeView {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.v = v
	return v
}

func (l *lastView) holders() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.v.holders()
}

// holders returns the holder of each of the three jobs' leases ("" if
// free).
func (v storeView) holders() map[string]string {
	out := map[string]string{}
	for _, l := range v.Leases {
		if slices.Contains(leases, l.Name) {
			out[l.Name] = l.Holder
		}
	}
	return out
}

// eachLeadsOne reports whether each of the three jobs is held, each by
// another of holders.
func (v storeView) eachLeadsOne(holders ...string) bool {
	got := v.holders()
	var by []string
	for _, job := range leases {
		if !slices.Contains(holders, got[job]) {
			return false
		}
		by = append(by, got[job])
	}
	slices.Sort(by)
	return len(slices.Compact(by)) == len(holders) && len(holders) == len(leases)
}

// TestThreeReplicas is issue 21's acceptance run: three leaderd processes
// on one SQLite file, default flags, started one after another: within
// 20 s each leads exactly one of the three jobs; after Ctrl-C on one, its
// job runs on another within TTL + 5 s; started again, within 30 s each
// leads one again.
func TestThreeReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three leaderd processes")
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "leaderd.db")
	names := []string{"r1", "r2", "r3"}
	procs := map[string]*proc{}
	for _, h := range names {
		procs[h] = startProc(t, dir, db, h)
	}
	logs := func() string {
		var b strings.Builder
		for _, h := range names {
			fmt.Fprintf(&b, "--- %s:\n%s", h, procs[h].out)
		}
		return b.String()
	}
	var last lastView
	balanced := func() bool { return last.set(view(t, db)).eachLeadsOne(names...) }
	start := time.Now()
	require.Eventually(t, balanced, 20*time.Second, 100*time.Millisecond, "each of r1, r2, r3 should lead one job within 20 s; last %v\n%s", last.holders(), logs())
	t.Logf("balanced %v after the third started", time.Since(start).Round(time.Millisecond))
	// It stays so: balancing settles, it does not churn.
	require.Never(t, func() bool { return !balanced() }, 3*time.Second, 200*time.Millisecond, "the jobs should stay one each; last %v", last.holders())
	now := view(t, db)
	require.True(t, now.eachLeadsOne(names...), "balanced: %v", now.holders())
	members := map[string]bool{}
	for _, m := range now.Members {
		members[m.Holder] = true
	}
	assert.Equal(t, map[string]bool{"r1": true, "r2": true, "r3": true}, members, "status -json lists the three members")
	for _, l := range now.Leases {
		if !slices.Contains(leases, l.Name) {
			continue
		}
		var waiting []string
		for _, c := range l.Waiting {
			waiting = append(waiting, c.Holder)
		}
		want := slices.DeleteFunc(slices.Clone(names), func(h string) bool { return h == l.Holder })
		assert.Equal(t, want, waiting, "the members that wait for %s", l.Name)
	}

	// Ctrl-C on r2: its job runs on r1 or r3 within TTL + 5 s.
	var job string
	for j, h := range now.holders() {
		if h == "r2" {
			job = j
		}
	}
	stopped := time.Now()
	procs["r2"].interrupt(t)
	require.Eventually(t, func() bool {
		h := view(t, db).holders()[job]
		return h == "r1" || h == "r3"
	}, defaultTTL+5*time.Second-time.Since(stopped), 100*time.Millisecond, "%s should run on r1 or r3 within TTL + 5 s of r2's Ctrl-C\n%s", job, logs())
	t.Logf("%s moved %v after r2's Ctrl-C", job, time.Since(stopped).Round(time.Millisecond))

	// r2 again: within 30 s each leads one again.
	restarted := time.Now()
	procs["r2"] = startProc(t, dir, db, "r2")
	require.Eventually(t, balanced, 30*time.Second-time.Since(restarted), 100*time.Millisecond,
		"each should lead one job again within 30 s of r2's restart; last %v\n%s", last.holders(), logs())
	t.Logf("balanced again %v after r2's restart", time.Since(restarted).Round(time.Millisecond))
	for _, h := range names {
		procs[h].interrupt(t)
	}
	for _, l := range view(t, db).Leases {
		assert.True(t, l.Free, "after all stopped, %s should be free", l.Name)
	}
	assert.Empty(t, view(t, db).Members, "after all stopped, no member is left")
}

// TestDrain: leaderd drain moves every lease off a running replica, whose
// control socket has mode 0600, and leaves it out of the members until
// leaderd resume; kill -USR1 drains as well.
func TestDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two leaderd processes")
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "leaderd.db")
	a := startProc(t, dir, db, "a")
	b := startProc(t, dir, db, "b")
	logs := func() string { return fmt.Sprintf("--- a:\n%s--- b:\n%s", a.out, b.out) }

	fi, err := os.Stat(a.control)
	require.NoError(t, err)
	assert.Equal(t, os.ModeSocket|0o600, fi.Mode()&(os.ModeType|os.ModePerm), "the control socket of a: %v", fi.Mode())

	leads := func(v storeView, holder string) int {
		n := 0
		for _, h := range v.holders() {
			if h == holder {
				n++
			}
		}
		return n
	}
	var last lastView
	both := func() bool {
		v := last.set(view(t, db))
		return leads(v, "a") >= 1 && leads(v, "b") >= 1 && leads(v, "a")+leads(v, "b") == 3
	}
	require.Eventually(t, both, 20*time.Second, 100*time.Millisecond, "a and b should share the jobs; last %v\n%s", last.holders(), logs())

	// leaderd drain -control: it returns once a holds no lease, and b holds
	// all three.
	var stdout, stderr bytes.Buffer
	require.Zero(t, run(context.Background(), []string{"drain", "-control", a.control}, &stderr, &stdout), "leaderd drain: %s", stderr.String())
	assert.Contains(t, stdout.String(), "ok: drained")
	v := view(t, db)
	assert.Zero(t, leads(v, "a"), "a holds a lease after leaderd drain returned: %v", v.holders())
	require.Eventually(t, func() bool { return leads(last.set(view(t, db)), "b") == 3 }, 10*time.Second, 100*time.Millisecond,
		"b should lead every job after a drained; last %v\n%s", last.holders(), logs())
	for _, m := range view(t, db).Members {
		assert.NotEqual(t, "a", m.Holder, "a drained instance is no member")
	}
	assert.Never(t, func() bool { return leads(view(t, db), "a") > 0 }, 2*defaultTTL, 200*time.Millisecond, "a drained instance takes no lease")

	// leaderd resume: a takes its share again.
	stdout.Reset()
	require.Zero(t, run(context.Background(), []string{"resume", "-control", a.control}, &stderr, &stdout), "leaderd resume: %s", stderr.String())
	require.Eventually(t, both, 20*time.Second, 100*time.Millisecond, "a should take its share again after resume; last %v\n%s", last.holders(), logs())

	// kill -USR1 drains too.
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGUSR1))
	require.Eventually(t, func() bool { return leads(last.set(view(t, db)), "b") == 3 }, 20*time.Second, 100*time.Millisecond,
		"SIGUSR1 should drain a; last %v\n%s", last.holders(), logs())
	assert.Contains(t, a.out.String(), "by=SIGUSR1")

	a.interrupt(t)
	b.interrupt(t)
	_, err = os.Stat(a.control)
	assert.ErrorIs(t, err, os.ErrNotExist, "a stopped daemon removes its control socket")
}
