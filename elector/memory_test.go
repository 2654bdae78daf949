package elector_test

import (
	"testing"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/elector/electortest"
)

func TestMemoryStore(t *testing.T) {
	electortest.TestStore(t, func(*testing.T) elector.Store { return elector.NewMemoryStore() })
}
