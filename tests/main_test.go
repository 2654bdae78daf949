package tests

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leaderaware/leaderaware/internal/testing/pgtest"
	"github.com/leaderaware/leaderaware/internal/testing/replicatest"
)

// TestMain checks that no test leaves a goroutine behind. Started by the
// multi-process tests as one of their child processes (see
// failover_linux_test.go), the test binary runs that child instead of the
// tests.
func TestMain(m *testing.M) {
	replicatest.RunChild(children)
	pgtest.SaySkipped("tests")
	goleak.VerifyTestMain(m)
}

// children are the child processes of the multi-process tests, by name. It
// is set on the systems that run them.
var children map[string]func(args []string) error
