package etcdlease

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leaderaware/leaderaware/internal/testing/helperproc"
)

// TestMain checks that no test leaves a goroutine behind: every test closes
// its stores, which stops their watches and closes their clients, and stops
// its embedded etcd. Started by the multi-process tests as one of their
// helper processes (see proc_linux_test.go), the test binary runs that helper
// instead of the tests.
func TestMain(m *testing.M) {
	helperproc.Main(helpers)
	goleak.VerifyTestMain(m)
}

// helpers are this package's helper modes (see package helperproc), by
// name. It is set on the systems that run them.
var helpers map[string]func(args []string) error
