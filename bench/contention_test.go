package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/internal/testing/helperproc"
)

// Parameters of BenchmarkSQLiteContention.
const (
	contentionProcs    = 8               // processes on one file
	contentionRun      = 2 * time.Second // loop time of each process, per b.Loop iteration
	contentionStartIn  = time.Second     // spawn + Open must fit in it for the loops to start together
	contentionWaitMore = time.Minute     // beyond start + run, before the children are killed
)

// contenderSummary is the JSON line a helper in mode contender prints
// (see its contenderSummary type).
type contenderSummary struct {
	ID        int      `json:"id"`
	ElapsedNS int64    `json:"elapsed_ns"`
	LateNS    int64    `json:"late_ns"`
	Ops       int64    `json:"ops"`
	Acquired  int64    `json:"acquired"`
	TakenOver int64    `json:"taken_over"`
	Held      int64    `json:"held"`
	Renewed   int64    `json:"renewed"`
	Lost      int64    `json:"lost"`
	Released  int64    `json:"released"`
	Got       int64    `json:"got"`
	NoLease   int64    `json:"no_lease"`
	Written   int64    `json:"written"`
	Abandoned int64    `json:"abandoned"`
	StaleLost int64    `json:"stale_lost"`
	MaxOpNS   int64    `json:"max_op_ns"`
	Busy      int64    `json:"busy"`
	Other     int64    `json:"other"`
	BusyEx    []string `json:"busy_examples"`
	OtherEx   []string `json:"other_examples"`
}

// BenchmarkSQLiteContention runs 8 processes at once on one fresh SQLite
// file, each this test binary as a helper in mode contender (see package
// helperproc):
// each opens the file with sqlitelease.Open (all 8 at the same moment), then
// two holders per process loop over 4 lease names with TryAcquire (mostly
// ErrHeld), Get, Renew, Release and short fenced writes (Store.Fenced for the bare lease, via leaseterm,
// with one INSERT) for 2 s, with TTL 250 ms and a 15 s context per call.
// Holders watch the leases others hold and take over one they have seen
// unchanged for its TTL, as electors do. Now and then a holder abandons a
// term and, once another term has superseded it, tries Renew or a fenced
// write with it (must be ErrLeaseLost). It checks the
// promise of package sqlitelease that callers never see SQLITE_BUSY: every
// error a process gets is either expected (ErrHeld, ErrLeaseLost,
// ErrNoLease) or counted as busy (SQLite BUSY/LOCKED code, or "busy" or
// "locked" in the text) or other, and the benchmark fails, printing
// examples, if busy or other is not 0. When the test binary has the race
// detector, the contenders, which are that binary, have it too, and a race
// in them fails the run.
//
// Cases: busy_timeout=default opens the stores as applications do;
// busy_timeout=0 passes sqlitelease.WithBusyTimeout(0), so SQLite never
// waits for a lock itself and every conflict goes through the store's own
// retries.
//
// Each b.Loop iteration is one such 2 s run on a new file (about 3 s with
// process start), so use -benchtime=1x (or Nx):
//
//	go test -run '^$' -bench SQLiteContention -benchtime=1x ./bench/
//
// Metrics: ops/s (store calls per second, all processes), busy and
// other-errors (totals over all iterations, must be 0), writes/s (committed
// fenced writes), terms/s (acquires that won), max-op-ms (slowest single
// call in any process). ns/op is hidden (it would be the fixed run time);
// B/op and allocs/op only count the parent, not the processes.
func BenchmarkSQLiteContention(b *testing.B) {
	b.Run("busy_timeout=default", func(b *testing.B) { benchContention(b) })
	b.Run("busy_timeout=0", func(b *testing.B) { benchContention(b, "-busy-timeout=0") })
}

// benchContention is one case of BenchmarkSQLiteContention: the contenders
// get args besides their usual flags.
func benchContention(b *testing.B, args ...string) {
	var (
		total      contenderSummary
		opsPerSec  float64
		iterations int
	)
	for b.Loop() {
		sums := runContenders(b, filepath.Join(b.TempDir(), "contention.db"), args...)
		iterations++
		for _, s := range sums {
			if s.ElapsedNS > 0 {
				opsPerSec += float64(s.Ops) / (float64(s.ElapsedNS) / 1e9)
			}
			total.Ops += s.Ops
			total.Acquired += s.Acquired
			total.TakenOver += s.TakenOver
			total.Held += s.Held
			total.Renewed += s.Renewed
			total.Lost += s.Lost
			total.Released += s.Released
			total.Got += s.Got
			total.NoLease += s.NoLease
			total.Written += s.Written
			total.Abandoned += s.Abandoned
			total.StaleLost += s.StaleLost
			total.MaxOpNS = max(total.MaxOpNS, s.MaxOpNS)
			total.LateNS = max(total.LateNS, s.LateNS)
			total.Busy += s.Busy
			total.Other += s.Other
			for _, e := range s.BusyEx {
				total.BusyEx = append(total.BusyEx, fmt.Sprintf("process %d: %s", s.ID, e))
			}
			for _, e := range s.OtherEx {
				total.OtherEx = append(total.OtherEx, fmt.Sprintf("process %d: %s", s.ID, e))
			}
		}
		if total.Busy != 0 || total.Other != 0 {
			b.Fatalf("callers saw %d busy and %d other errors; examples:\nbusy:\n  %s\nother:\n  %s",
				total.Busy, total.Other, strings.Join(total.BusyEx, "\n  "), strings.Join(total.OtherEx, "\n  "))
		}
	}
	n := float64(iterations)
	secs := n * contentionRun.Seconds()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(opsPerSec/n, "ops/s")
	b.ReportMetric(float64(total.Busy), "busy")
	b.ReportMetric(float64(total.Other), "other-errors")
	b.ReportMetric(float64(total.Written)/secs, "writes/s")
	b.ReportMetric(float64(total.Acquired)/secs, "terms/s")
	b.ReportMetric(float64(total.MaxOpNS)/1e6, "max-op-ms")
	b.Logf("%d×%d processes: %d ops: acquire %d won (%d of them takeovers) / %d held, renew %d ok, %d lost (renew or fenced), release %d, get %d found / %d none, fenced writes %d, abandoned %d, stale term refused %d; slowest op %v; latest loop start %v after the common start",
		iterations, contentionProcs, total.Ops, total.Acquired, total.TakenOver, total.Held, total.Renewed, total.Lost,
		total.Released, total.Got, total.NoLease, total.Written, total.Abandoned, total.StaleLost,
		time.Duration(total.MaxOpNS).Round(time.Microsecond), time.Duration(total.LateNS).Round(time.Microsecond))
}

// runContenders starts contentionProcs contenders at once on the file db,
// waits for all of them and returns their summaries. It kills and waits for
// every process it started on all paths: a process still running
// contentionWaitMore after the end of its loop is killed, and so are the
// others when one cannot be started.
func runContenders(b *testing.B, db string, args ...string) []contenderSummary {
	b.Helper()
	start := time.Now().Add(contentionStartIn)
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(contentionRun+contentionWaitMore))
	defer cancel()

	type proc struct {
		cmd            *exec.Cmd
		stdout, stderr bytes.Buffer
	}
	procs := make([]*proc, 0, contentionProcs)
	waitAll := func() []error {
		errs := make([]error, len(procs))
		for i, p := range procs {
			errs[i] = p.cmd.Wait()
		}
		return errs
	}
	for i := range contentionProcs {
		p := &proc{}
		p.cmd = helperproc.CommandContext(ctx, b, "contender", append([]string{
			"-db", db,
			"-id", strconv.Itoa(i),
			"-start", strconv.FormatInt(start.UnixNano(), 10),
			"-duration", contentionRun.String(),
		}, args...)...)
		p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
		p.cmd.WaitDelay = time.Second
		if err := p.cmd.Start(); err != nil {
			cancel() // kills the ones started
			waitAll()
			b.Fatalf("start contender %d: %v", i, err)
		}
		procs = append(procs, p)
	}
	errs := waitAll()

	sums := make([]contenderSummary, 0, len(procs))
	var bad []string
	for i, p := range procs {
		if errs[i] != nil {
			bad = append(bad, fmt.Sprintf("contender %d: %v\nstderr: %s", i, errs[i], p.stderr.String()))
			continue
		}
		var s contenderSummary
		if err := json.Unmarshal(bytes.TrimSpace(p.stdout.Bytes()), &s); err != nil {
			bad = append(bad, fmt.Sprintf("contender %d: summary %q: %v", i, p.stdout.String(), err))
			continue
		}
		if p.stderr.Len() > 0 {
			b.Logf("contender %d stderr: %s", i, p.stderr.String())
		}
		sums = append(sums, s)
	}
	if len(bad) > 0 {
		b.Fatalf("contenders failed:\n%s", strings.Join(bad, "\n"))
	}
	return sums
}
