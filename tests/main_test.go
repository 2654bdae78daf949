package tests

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leaderaware/leaderaware/internal/testing/helperproc"
	"github.com/leaderaware/leaderaware/internal/testing/pgtest"
)

// TestMain checks that no test leaves a goroutine behind. Started by the
// multi-process tests as one of their helper processes (see
// failover_linux_test.go), the test binary runs that helper instead of the
// tests.
func TestMain(m *testing.M) {
	helperproc.Main(nil)
	pgtest.SaySkipped("tests")
	goleak.VerifyTestMain(m)
}
