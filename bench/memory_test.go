package bench

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// BenchmarkMemoryStore measures each operation of elector.MemoryStore, the
// store of the synctest tests and of BenchmarkCycle and
// BenchmarkOldDesignCycle. There is no statement to compare with: this is
// the cost of the Store contract itself (argument checks, one mutex, one map
// access).
//
// Sub-benchmarks:
//
//	acquire       TryAcquire of an expired lease
//	acquire-held  TryAcquire of a live lease (what waiting candidates do): ErrHeld
//	renew         Renew of the live lease
//	get           Get of the live lease
func BenchmarkMemoryStore(b *testing.B) {
	ctx := context.Background()
	s := elector.NewMemoryStore()
	const (
		// As in BenchmarkSQLiteStore: cycle through leases of a 1 ns TTL,
		// so that each acquire finds an expired lease without relying on
		// the clock moving between two back-to-back calls.
		cycle    = 1024
		expiring = time.Nanosecond
		long     = time.Hour
	)

	b.Run("acquire", func(b *testing.B) {
		ns := make([]string, cycle)
		for i := range ns {
			ns[i] = fmt.Sprintf("acquire/%d", i)
			if _, err := s.TryAcquire(ctx, ns[i], "h", expiring); err != nil {
				b.Fatal(err)
			}
		}
		i := 0
		for b.Loop() {
			if _, err := s.TryAcquire(ctx, ns[i%cycle], "h", expiring); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})

	held, err := s.TryAcquire(ctx, "held", "leader", long)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("acquire-held", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.TryAcquire(ctx, "held", "candidate", long); !errors.Is(err, elector.ErrHeld) {
				b.Fatalf("TryAcquire of a held lease: %v, want ErrHeld", err)
			}
		}
	})
	b.Run("renew", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Renew(ctx, held, long); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Get(ctx, "held"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
