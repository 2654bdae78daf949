package etcdlease

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leaderaware/leaderaware/internal/testing/replicatest"
)

// TestMain checks that no test leaves a goroutine behind: every test closes
// its stores, which stops their watches and closes their clients, and stops
// its embedded etcd. Started by the multi-process tests as one of their
// child processes (see proc_linux_test.go), the test binary runs that child
// instead of the tests.
func TestMain(m *testing.M) {
	replicatest.RunChild(children)
	goleak.VerifyTestMain(m)
}

// children are the child processes of the multi-process tests, by name. It
// is set on the systems that run them.
var children map[string]func(args []string) error
