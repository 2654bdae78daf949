// Package bench holds the benchmarks of leaderaware: dispatch overhead,
// cost per Start/Stop cycle, lease operations and failover, side by side
// with what they are measured against. Run them with
//
//	go test -run '^$' -bench . -benchmem ./bench/
package bench

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
