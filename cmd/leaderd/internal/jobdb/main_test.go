package jobdb_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leaderaware/leaderaware/internal/testing/pgtest"
)

func TestMain(m *testing.M) {
	pgtest.SaySkipped("jobdb")
	goleak.VerifyTestMain(m)
}
