//go:build linux

package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/helperproc"
	"github.com/leaderaware/leaderaware/internal/testing/pgtest"
)

// Parameters of BenchmarkFollowers.
const (
	followersLeases   = 1000
	followersReplicas = 3 // replica 0 leads, the others follow
	// followersWindowEnv overrides the measured window (a Go duration).
	followersWindowEnv = "LEADERAWARE_BENCH_FOLLOWERS_WINDOW"
	// followersProfileEnv names a directory where every replica writes a
	// CPU profile of its whole run, <case>-r<i>.pprof.
	followersProfileEnv   = "LEADERAWARE_BENCH_FOLLOWERS_PROFILE"
	followersWindow       = 20 * time.Second
	followersSettle       = elector.DefaultRetryInterval // after every follower waits, before measuring
	followersStartTimeout = 2 * time.Minute              // for a replica to lead or wait on every lease
	followersStopTimeout  = 30 * time.Second             // SIGTERM to exit, before SIGKILL
	// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
	// 100 on every Linux architecture Go supports.
	clockTicks = 100
)

// BenchmarkFollowers measures what 1,000 leases cost 3 replica processes on
// one store at the default timings (TTL 15 s, RenewInterval 5 s,
// RetryInterval 2 s): the CPU of the leader, of each follower and, on
// PostgreSQL, of the server backends serving them. Goal: every replica
// under 1% of a core on SQLite, under 2% on PostgreSQL (client side), the
// PostgreSQL backends together under 5%.
//
// Each replica is this test binary as a helper in mode follower (see
// package helperproc) running 1,000 LeaseElectors, lease-0000 … lease-0999, each
// campaigning and holding what it wins. Replica 0 starts first and leads
// all 1,000 leases; then replicas 1 and 2 start and wait on every one of
// them. Once both report 1,000 waiting electors, and 2 s more, each b.Loop
// iteration is one window of 20 s (LEADERAWARE_BENCH_FOLLOWERS_WINDOW sets
// another multiple of the RenewInterval, 5 s: the leader renews its 1,000
// leases in one burst per RenewInterval, as it acquired them together) over
// which the benchmark reads every process's CPU time (utime + stime in
// /proc/<pid>/stat, every thread, runtime and GC included; 10 ms
// resolution). -benchtime=Nx measures N windows in a row.
//
// Sub-benchmarks: {sqlite,pg}/watch={bulk,poll}. sqlite: one file in
// b.TempDir(). pg: a fresh schema, dropped at the end; skipped unless
// LEADERAWARE_TEST_PG is set. watch=bulk runs the store as applications do,
// so the elector's watch reads a store that implements elector.BulkReader
// in bulk; watch=poll hides the store's optional interfaces (follower
// -poll), so the watch reads every waiting elector's lease with a Get of
// its own every jittered RetryInterval: the baseline.
//
// Metrics (ns/op is hidden: it would be the window): %core-leader and
// %core-follower-max (the more expensive follower) are CPU time over the
// windows' wall time, in percent of one core; calls/s-follower is that
// follower's own store calls per second (its electors' TryAcquires, as
// their observers count them; a bulk watcher's reads are not among them);
// %core-pg-server is the CPU of the backends whose application_name
// the replicas' stores set (their lease pools, pools and listeners), read
// from /proc on this host: the postmaster and the server's background
// processes (checkpointer, WAL writer, autovacuum) are not counted. The
// benchmark fails if a term ends or a campaign errs while it runs.
//
// LEADERAWARE_BENCH_FOLLOWERS_PROFILE=<dir> makes every replica write a CPU
// profile of its whole run into dir (sqlite-watch-bulk-r1.pprof, …).
//
//	go test -run '^$' -bench Followers ./bench/
//	LEADERAWARE_BENCH_FOLLOWERS_WINDOW=10s go test -run '^$' -bench Followers ./bench/
func BenchmarkFollowers(b *testing.B) {
	window := followersWindow
	if v := os.Getenv(followersWindowEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d%defaultRenewInterval != 0 {
			b.Fatalf("%s=%q: want a multiple of the default RenewInterval (%v), such as 10s", followersWindowEnv, v, defaultRenewInterval)
		}
		window = d
	}
	for _, store := range []string{"sqlite", "pg"} {
		b.Run(store, func(b *testing.B) {
			for _, watch := range []string{"bulk", "poll"} {
				b.Run("watch="+watch, func(b *testing.B) {
					benchFollowers(b, store, watch == "poll", window)
				})
			}
		})
	}
}

// benchFollowers is one case of BenchmarkFollowers.
func benchFollowers(b *testing.B, store string, poll bool, window time.Duration) {
	var (
		args []string
		pg   *pgBackends
	)
	switch store {
	case "sqlite":
		args = []string{"-db", filepath.Join(b.TempDir(), "followers.db")}
	case "pg":
		dsn := pgtest.DSN(b)
		schema := pgtest.Schema(b, dsn, "bench_followers_")
		args = []string{"-pg", dsn, "-schema", schema}
		pg = openPGBackends(b, dsn, schema) // the schema's name is unique: it names the connections too
	}
	if poll {
		args = append(args, "-poll")
	}
	replicaArgs := func(i int) []string {
		a := append(args[:len(args):len(args)], "-leases", strconv.Itoa(followersLeases), "-holder", fmt.Sprintf("replica-%d", i))
		if pg != nil {
			a = append(a, "-app", pg.app(i))
		}
		if dir := os.Getenv(followersProfileEnv); dir != "" {
			name := strings.NewReplacer("/", "-", "=", "-").Replace(strings.TrimPrefix(b.Name(), "BenchmarkFollowers/"))
			a = append(a, "-cpuprofile", filepath.Join(dir, fmt.Sprintf("%s-r%d.pprof", name, i)))
		}
		return a
	}

	procs := []*followerProc{startFollower(b, 0, replicaArgs(0)...)}
	procs[0].await(b, "to lead every lease", func(s followerStatus) bool { return s.Held == followersLeases })
	for i := 1; i < followersReplicas; i++ {
		procs = append(procs, startFollower(b, i, replicaArgs(i)...))
	}
	for _, p := range procs[1:] {
		p.await(b, "to wait on every lease", func(s followerStatus) bool { return s.Waiting == followersLeases })
	}
	time.Sleep(followersSettle)

	cpu := make([]time.Duration, len(procs))
	calls, renews, renewsFailed := make([]int64, len(procs)), make([]int64, len(procs)), make([]int64, len(procs))
	var wall, server time.Duration
	serverByReplica := make([]time.Duration, len(procs))
	for b.Loop() {
		before := make([]followerStatus, len(procs))
		cpu0 := make([]time.Duration, len(procs))
		for i, p := range procs {
			before[i] = p.status(b)
			cpu0[i] = procCPU(b, p.cmd.Process.Pid)
		}
		var pg0 map[backend]time.Duration
		if pg != nil {
			pg0 = pg.cpu(b)
		}
		start := time.Now()
		time.Sleep(window)
		wall += time.Since(start)
		if pg != nil {
			for i, d := range pg.since(b, pg0) {
				serverByReplica[i] += d
				server += d
			}
		}
		for i, p := range procs {
			cpu[i] += procCPU(b, p.cmd.Process.Pid) - cpu0[i]
			after := p.status(b)
			calls[i] += after.Calls - before[i].Calls
			renews[i] += after.Renews - before[i].Renews
			renewsFailed[i] += after.RenewsFailed - before[i].RenewsFailed
		}
	}

	// The leader must still lead everything, and the followers wait on it.
	for i, p := range procs {
		s := p.status(b)
		if s.Lost > 0 || s.Errors > 0 {
			b.Errorf("replica %d: %d terms lost, %d campaign errors; the last: %s", i, s.Lost, s.Errors, s.LastErr)
		}
		if i == 0 && s.Held != followersLeases || i > 0 && s.Waiting != followersLeases {
			b.Errorf("replica %d at the end: %d held, %d waiting; want replica 0 to hold all %d, the others to wait",
				i, s.Held, s.Waiting, followersLeases)
		}
	}

	pct := func(d time.Duration) float64 { return float64(d) / float64(wall) * 100 }
	worst := 1
	for i := 2; i < len(procs); i++ {
		if cpu[i] > cpu[worst] {
			worst = i
		}
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(pct(cpu[0]), "%core-leader")
	b.ReportMetric(pct(cpu[worst]), "%core-follower-max")
	b.ReportMetric(float64(calls[worst])/wall.Seconds(), "calls/s-follower")
	if pg != nil {
		b.ReportMetric(pct(server), "%core-pg-server")
	}
	var lines []string
	for i := range procs {
		l := fmt.Sprintf("replica %d: %.2f%% of a core, %.0f store calls/s (%d renewals, %d failed)",
			i, pct(cpu[i]), float64(calls[i])/wall.Seconds(), renews[i], renewsFailed[i])
		if pg != nil {
			l += fmt.Sprintf(", its backends %.2f%%", pct(serverByReplica[i]))
		}
		lines = append(lines, l)
	}
	b.Logf("%v measured: %s", wall.Round(time.Millisecond), strings.Join(lines, "; "))
}

// followerStatus is the status line of a helper in mode follower.
type followerStatus struct {
	Held, Waiting, Calls, Renews, Lost, Errors int64
	RenewsFailed                               int64  `json:"renews_failed"`
	LastErr                                    string `json:"last_err"`
}

// followerProc is a running replica process.
type followerProc struct {
	name   string // "replica <i>", for errors
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string   // its status lines; closed when its stdout ends
	stderr bytes.Buffer  // read only after the process ended
	read   chan struct{} // closed when the reader of its stdout returned
}

// startFollower starts a helper in mode follower with args and stops it
// when b ends: SIGTERM, then SIGKILL if it has not exited within
// followersStopTimeout. A replica that exits other than 0 fails b.
func startFollower(b *testing.B, i int, args ...string) *followerProc {
	b.Helper()
	p := &followerProc{name: fmt.Sprintf("replica %d", i), cmd: helperproc.Command(b, "follower", args...), lines: make(chan string, 1), read: make(chan struct{})}
	p.cmd.Stderr = &p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		b.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() {
		defer close(p.read)
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	b.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		exited := make(chan error, 1)
		go func() {
			for range p.lines { // Wait closes stdout: read it to the end first
			}
			<-p.read
			exited <- p.cmd.Wait()
		}()
		var err error
		select {
		case err = <-exited:
		case <-time.After(followersStopTimeout):
			_ = p.cmd.Process.Kill()
			err = fmt.Errorf("still running %v after SIGTERM, killed: %w", followersStopTimeout, <-exited)
		}
		_ = p.stdin.Close()
		if err != nil {
			b.Errorf("%s: %v\nstderr:\n%s", p.name, err, p.stderr.String())
		}
	})
	return p
}

// status asks the replica for its status.
func (p *followerProc) status(b *testing.B) followerStatus {
	b.Helper()
	if _, err := io.WriteString(p.stdin, "\n"); err != nil {
		b.Fatalf("ask %s for its status: %v", p.name, err)
	}
	select {
	case l, ok := <-p.lines:
		if !ok {
			b.Fatalf("%s ended its output (it exited: see its stderr below)", p.name)
		}
		var s followerStatus
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			b.Fatalf("%s: status %q: %v", p.name, l, err)
		}
		return s
	case <-time.After(10 * time.Second):
		b.Fatalf("%s did not answer for its status within 10s", p.name)
		panic("unreachable")
	}
}

// await asks the replica for its status until done returns true, and
// fails b after followersStartTimeout or on a campaign error.
func (p *followerProc) await(b *testing.B, what string, done func(followerStatus) bool) {
	b.Helper()
	deadline := time.Now().Add(followersStartTimeout)
	for {
		s := p.status(b)
		switch {
		case done(s):
			return
		case s.Errors > 0 || s.Lost > 0:
			b.Fatalf("waiting for %s %s: %d campaign errors, %d terms lost; the last: %s", p.name, what, s.Errors, s.Lost, s.LastErr)
		case time.Now().After(deadline):
			b.Fatalf("%s did not manage %s within %v: %d held, %d waiting", p.name, what, followersStartTimeout, s.Held, s.Waiting)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// procCPU returns the user and system CPU time of the process pid so far,
// all its threads included.
func procCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	cpu, _, err := readProcStat(pid)
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}

// readProcStat returns the user + system CPU time and the start time (in
// clock ticks after boot: with pid, it names one process) of the process
// pid, from /proc/<pid>/stat.
func readProcStat(pid int) (cpu time.Duration, started uint64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// pid (comm) state ppid …: comm may hold spaces and parentheses, so
	// count the fields after its last ')'. Field 3 (state) is f[0].
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: no ')' in %q", pid, data)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields in %q, want at least 22", pid, len(f)+2, data)
	}
	var ticks [3]uint64 // utime (field 14), stime (15), starttime (22)
	for j, field := range []int{14, 15, 22} {
		if ticks[j], err = strconv.ParseUint(f[field-3], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/stat field %d: %w", pid, field, err)
		}
	}
	return time.Duration(ticks[0]+ticks[1]) * time.Second / clockTicks, ticks[2], nil
}

// pgBackends finds the PostgreSQL backends of the replicas, by the
// application_name each replica gives its store's connections, and reads
// their CPU time from /proc: the server must run on this host.
type pgBackends struct {
	conn   *pgx.Conn
	prefix string
}

// backend names one server process.
type backend struct {
	pid     int
	started uint64
	replica int
}

// openPGBackends connects to dsn to list the backends of the replicas,
// whose connections are named after prefix, and closes the connection when
// b ends.
func openPGBackends(b *testing.B, dsn, prefix string) *pgBackends {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = conn.Close(ctx)
	})
	return &pgBackends{conn: conn, prefix: prefix}
}

// app returns the application_name of replica i's connections.
func (p *pgBackends) app(i int) string { return fmt.Sprintf("%s-r%d", p.prefix, i) }

// cpu returns the CPU time so far of every backend of the replicas.
func (p *pgBackends) cpu(b *testing.B) map[backend]time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := p.conn.Query(ctx, `SELECT pid, application_name FROM pg_stat_activity
WHERE datname = current_database() AND starts_with(application_name, $1)`, p.prefix+"-r")
	if err != nil {
		b.Fatal(err)
	}
	type row struct {
		pid int
		app string
	}
	rs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.pid, &x.app)
	})
	if err != nil {
		b.Fatal(err)
	}
	out := make(map[backend]time.Duration, len(rs))
	for _, r := range rs {
		replica, err := strconv.Atoi(strings.TrimPrefix(r.app, p.prefix+"-r"))
		if err != nil {
			b.Fatalf("backend %d: application_name %q", r.pid, r.app)
		}
		cpu, started, err := readProcStat(r.pid)
		if err != nil {
			b.Fatalf("read the CPU time of backend %d (the PostgreSQL server must run on this host): %v", r.pid, err)
		}
		out[backend{r.pid, started, replica}] = cpu
	}
	if len(out) == 0 {
		b.Fatal("no backend of the replicas in pg_stat_activity")
	}
	return out
}

// since returns, per replica, the CPU time its backends used since before
// was read: a backend that started since counts whole; one that has ended
// since is lost (it is logged).
func (p *pgBackends) since(b *testing.B, before map[backend]time.Duration) []time.Duration {
	b.Helper()
	now := p.cpu(b)
	out := make([]time.Duration, followersReplicas)
	for k, cpu := range now {
		out[k.replica] += cpu - before[k]
	}
	for k := range before {
		if _, ok := now[k]; !ok {
			b.Logf("backend %d of replica %d ended in the window: its CPU time is not counted", k.pid, k.replica)
		}
	}
	return out
}
