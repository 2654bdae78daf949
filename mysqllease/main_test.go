package mysqllease

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leaderaware/leaderaware/internal/testing/helperproc"
)

// The tests that need a server read its DSN from LEADERAWARE_TEST_MYSQL. They
// skip without it, unless CI is set: then, as when the server cannot be
// reached, they fail.
//
//	LEADERAWARE_TEST_MYSQL='root@tcp(127.0.0.1:3306)/test' go test -race ./...
//
// Each test makes tables with random names and drops them, so the tests may
// share a database with other work. On Linux, TestFailoverProcesses and
// TestChaosProcesses run the test binary itself as replica processes, and
// crash, freeze and stop them; the chaos schedule runs 20s
// (-chaos.duration, -chaos.seed). TestFrozenHolderMidRenew and
// TestFrozenCandidateMidTakeover freeze one store connection, through a
// proxy, right after it sent a lease write, and check that a candidate
// still takes over after the TTL.

// TestMain checks that no test leaves a goroutine behind: every test closes
// its stores, which stops their polls and closes their pools. Started by
// the multi-process tests as one of their helper processes (see
// proc_linux_test.go), the test binary runs that helper instead of the
// tests.
func TestMain(m *testing.M) {
	helperproc.Main(helpers)
	goleak.VerifyTestMain(m)
}

// helpers are this package's helper modes (see package helperproc), by
// name. It is set on the systems that run them.
var helpers map[string]func(args []string) error
