package sqlitelease_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leaderaware/leaderaware/internal/testing/helperproc"
)

// helpers are this package's own helper modes, besides helperproc's (set
// on Linux).
var helpers map[string]func(args []string) error

// TestMain runs the test binary as a helper when a multi-process test
// starts it as one (see package helperproc).
func TestMain(m *testing.M) {
	helperproc.Main(helpers)
	goleak.VerifyTestMain(m)
}
