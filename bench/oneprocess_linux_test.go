package bench

import (
	"testing"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/storebench"
)

// BenchmarkOneProcess measures the client side of 1,000 leases at the
// default timings (TTL 15 s, RenewInterval 5 s, RetryInterval 2 s) in one
// process: one Store instance holds every lease, with one elector per lease,
// and another instance on the same leases watches every one, with one
// campaigning elector per lease (see storebench.ClientCPU). Goal: under 1%
// of a core, client side, with no acquires/s while the holders renew.
//
//	memory  two instances of one elector.MemoryStore (the elector's own
//	        cost, without a database)
//	sqlite  two Opens of one file in b.TempDir()
//	pg      two Opens of one fresh schema, dropped at the end; skipped
//	        unless LEADERAWARE_TEST_PG is set
//
// Metrics: %core (this process's CPU time over the window), renews/s and
// acquires/s (the terms' renewals, batched or not, and the waiting
// candidates' TryAcquires); ns/op is suppressed.
func BenchmarkOneProcess(b *testing.B) {
	b.Run("memory", func(b *testing.B) {
		mem := elector.NewMemoryStore()
		storebench.ClientCPU(b, mem, memoryInstance{mem}, nil)
	})
	b.Run("sqlite", func(b *testing.B) {
		sa, sb := sqliteInstances(b, "oneprocess.db")
		storebench.ClientCPU(b, sa, sb, nil)
	})
	b.Run("pg", func(b *testing.B) {
		sa, sb := pgInstances(b, "bench_oneprocess")
		storebench.ClientCPU(b, sa, sb, nil)
	})
}

// memoryInstance is a second instance of a memory store on the same
// leases, as a second Open of one database is: the elector gives each
// Store value a watch and a renewal schedule of its own.
type memoryInstance struct{ *elector.MemoryStore }
