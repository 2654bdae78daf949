package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/leaderaware/leaderaware/internal/testing/pgtest"
)

func TestMain(m *testing.M) {
	if os.Getenv(asLeaderd) == "1" {
		main() // a leaderd process of placement_test.go
	}
	pgtest.SaySkipped("cmd/leaderd")
	goleak.VerifyTestMain(m)
}
