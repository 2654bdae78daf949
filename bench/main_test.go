// Package bench holds the benchmarks of leaderaware: dispatch overhead,
// cost per Start/Stop cycle, lease operations and failover, side by side
// with what they are measured against. Run them with
//
//	go test -run '^$' -bench . -benchmem ./bench/
package bench

import (
	"log/slog"
	"testing"

	"go.uber.org/goleak"

	"github.com/leaderaware/leaderaware/internal/testing/helperproc"
)

// TestMain discards what the library logs through the default slog logger
// (the decorator logs every election and demotion at Info, the stores each
// Open): written out, it would add the cost of a log sink to every cycle and
// break the lines of the benchmark format that benchstat reads. Started by
// the multi-process benchmarks as one of their helper processes, the test
// binary runs that helper instead (see package helperproc).
func TestMain(m *testing.M) {
	helperproc.Main(nil)
	slog.SetDefault(slog.New(slog.DiscardHandler))
	goleak.VerifyTestMain(m)
}
