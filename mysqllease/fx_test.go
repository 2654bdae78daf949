package mysqllease

import (
	"testing"

	"github.com/leaderaware/leaderaware/internal/testing/replicatest"
)

// TestFxWithStore runs the app of Example_fx on the test's database (see
// replicatest.FxWithStore).
func TestFxWithStore(t *testing.T) {
	replicatest.FxWithStore(t, openStore(t, ""))
}
