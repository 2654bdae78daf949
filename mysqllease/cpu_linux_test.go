//go:build linux

package mysqllease

import (
	"testing"

	"github.com/leaderaware/leaderaware/internal/testing/storebench"
)

// BenchmarkClientCPU measures the client CPU of 1,000 leases held by one
// Store and campaigned for by another, at the default timings (see
// storebench.ClientCPU); the server's CPU is not counted.
//
//	LEADERAWARE_TEST_MYSQL='root@tcp(127.0.0.1:3306)/test' go test -run '^$' -bench ClientCPU ./
func BenchmarkClientCPU(b *testing.B) {
	table := freshTable(b)
	storebench.ClientCPU(b, openStore(b, table), openStore(b, table), nil)
}
