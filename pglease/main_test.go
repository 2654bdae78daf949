package pglease

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leaderaware/leaderaware/internal/testing/pgtest"
)

// TestMain checks that no test leaves a goroutine behind: every test closes
// its stores, which stops their listeners and closes their pools.
func TestMain(m *testing.M) {
	pgtest.SaySkipped("pglease")
	goleak.VerifyTestMain(m)
}
