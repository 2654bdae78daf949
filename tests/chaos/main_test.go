//go:build linux

// Package chaos runs several processes (this test binary, as helpers in
// mode chaos) that campaign for one lease on one
// store (a SQLite file, and PostgreSQL when LEADERAWARE_TEST_PG is set) and,
// for a bounded time, randomly crashes (SIGKILL, alone or in bursts that
// kill each next leader as soon as it is elected), pauses (SIGSTOP/SIGCONT),
// suspends (simulated through the clock seam) and gracefully stops their
// leader, restarting killed and stopped processes after a short random
// delay. All along it steps the wall clock of random processes by ±1h
// (-chaos.step, through the clock seam), and once per SQLite run it deletes the lease
// file under the running processes, which exit and are restarted on a new
// file. Each leader writes rows through fenced writes; after the run the
// test checks the rows and the processes' lines: that fencing held, that no
// two jobs ran at once, that tokens never went back (across the deletion
// too), that no committed write was lost, and that leaderless gaps stayed
// bounded (see check_test.go for the exact invariants and bounds). With
// -chaos.leases N > 1 (the default on PostgreSQL: 12) the processes
// campaign for N leases, the chaos lease among them, balanced by one
// placement.Group, and the run reports the group's handoffs per minute
// (see balance_test.go).
//
// The defaults: 5 processes, 60 s per store in CI (the CI environment
// variable is "true") and 20 s elsewhere, so a plain go test ./... stays
// quick. Longer runs take the flags, and a -timeout that fits both stores:
//
//	go test -race ./tests/chaos/ -v -chaos.duration=5m -timeout=15m
//	go test ./tests/chaos/ -run Postgres -chaos.procs=8 -chaos.seed=42
//	go test ./tests/chaos/ -chaos.hold=40ms # pauses mostly inside fenced transactions
//	go test ./tests/chaos/ -chaos.step=0    # no clock steps
//	go test ./tests/chaos/ -run SQLite -chaos.leases=12 # balanced: 12 leases in one placement.Group
package chaos

import (
	"flag"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leaderaware/leaderaware/internal/testing/helperproc"
	"github.com/leaderaware/leaderaware/internal/testing/pgtest"
)

var (
	flagDuration = flag.Duration("chaos.duration", defaultDuration(), "how long chaos runs on each store (default 60s when CI=true, else 20s)")
	flagProcs    = flag.Int("chaos.procs", 5, "number of processes (at least 3)")
	flagSeed     = flag.Uint64("chaos.seed", 0, "random seed of the chaos schedule (0: a random one, printed)")
	flagStep     = flag.Duration("chaos.step", time.Hour, "size of the wall-clock steps of random processes (0: no steps)")
	flagLeases   = flag.Int("chaos.leases", 0, "leases every process campaigns for, balanced by one placement.Group if more than 1 (0: 12 on PostgreSQL, 1 on SQLite)")
	flagHold     = flag.Duration("chaos.hold", 0, "how long each fenced transaction stays open after its insert: "+
		"a longer hold makes pauses land inside transactions (holding the database's locks) more often")
)

// TestMain runs the test binary as a helper when the chaos schedule starts
// it as one of its processes (mode chaos, see package helperproc).
func TestMain(m *testing.M) {
	helperproc.Main(nil)
	pgtest.SaySkipped("tests/chaos")
	goleak.VerifyTestMain(m)
}

// defaultDuration is 60 s per store in CI and 20 s elsewhere.
func defaultDuration() time.Duration {
	if os.Getenv("CI") == "true" {
		return time.Minute
	}
	return 20 * time.Second
}
