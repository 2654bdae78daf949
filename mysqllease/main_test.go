package mysqllease

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every test closes
// its stores, which stops their pollers and closes their pools.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
