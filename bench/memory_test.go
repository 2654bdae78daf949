package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// BenchmarkMemoryStore measures each operation of elector.MemoryStore, the
// store of the synctest tests and of BenchmarkCycle and
// BenchmarkOldDesignCycle (impl=store), side by side with a port of the
// MemoryStore of the model it replaced (impl=v1, see v1MemoryStore). There
// is no statement to compare with: this is the cost of the Store contract
// itself (argument checks, one mutex, one map access).
//
//	go test -run '^$' -bench MemoryStore -count=6 ./bench/ > mem.txt
//	benchstat -col /impl mem.txt
//
// Sub-benchmarks:
//
//	acquire       a takeover: TryAcquire of the lease the candidate observed
//	              (v1: of an expired lease)
//	acquire-held  TryAcquire of a lease held by another (what waiting
//	              candidates do): ErrHeld
//	renew         Renew of the held lease
//	get           Get of the held lease
func BenchmarkMemoryStore(b *testing.B) {
	ctx := context.Background()
	s, v1 := elector.NewMemoryStore(), newV1MemoryStore()
	const (
		// As in BenchmarkSQLiteStore: cycle through leases, of a 1 ns TTL
		// for v1, so that each v1 acquire finds an expired lease without
		// relying on the clock moving between two back-to-back calls.
		cycle    = 1024
		expiring = time.Nanosecond // v1
		long     = time.Hour
	)
	names := func(prefix string) []string {
		ns := make([]string, cycle)
		for i := range ns {
			ns[i] = fmt.Sprintf("%s/%d", prefix, i)
		}
		return ns
	}

	b.Run("acquire/impl=v1", func(b *testing.B) {
		ns := names("acquire")
		for _, n := range ns {
			if _, err := v1.TryAcquire(ctx, n, "h", expiring); err != nil {
				b.Fatal(err)
			}
		}
		i := 0
		for b.Loop() {
			if _, err := v1.TryAcquire(ctx, ns[i%cycle], "h", expiring); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("acquire/impl=store", benchTakeover(names("acquire"), func(name string, observed elector.Lease) (elector.Lease, error) {
		return s.TryAcquire(ctx, name, "h", long, observed)
	}))

	held, err := s.TryAcquire(ctx, "held", "leader", long, elector.Lease{})
	if err != nil {
		b.Fatal(err)
	}
	v1Held, err := v1.TryAcquire(ctx, "held", "leader", long)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("acquire-held/impl=v1", func(b *testing.B) {
		for b.Loop() {
			if _, err := v1.TryAcquire(ctx, "held", "candidate", long); !errors.Is(err, elector.ErrHeld) {
				b.Fatalf("TryAcquire of a held lease: %v, want ErrHeld", err)
			}
		}
	})
	b.Run("acquire-held/impl=store", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.TryAcquire(ctx, "held", "candidate", long, elector.Lease{}); !errors.Is(err, elector.ErrHeld) {
				b.Fatalf("TryAcquire of a held lease: %v, want ErrHeld", err)
			}
		}
	})
	b.Run("renew/impl=v1", func(b *testing.B) {
		for b.Loop() {
			if _, err := v1.Renew(ctx, v1Held, long); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("renew/impl=store", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Renew(ctx, held, long); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get/impl=v1", func(b *testing.B) {
		for b.Loop() {
			if _, err := v1.Get(ctx, "held"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get/impl=store", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Get(ctx, "held"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchTakeover returns the body of an acquire benchmark of the new model:
// each op takes over one of the leases names, in turn, passing the lease
// that the last acquire of it returned as observed. The leases are acquired
// before the first run, untimed, and kept from one run to the next (-count
// runs a sub-benchmark again in the same call of its parent).
func benchTakeover(names []string, acquire func(name string, observed elector.Lease) (elector.Lease, error)) func(*testing.B) {
	leases := make([]elector.Lease, len(names))
	return func(b *testing.B) {
		for i, n := range names {
			if leases[i].Token != 0 {
				break // acquired in an earlier run
			}
			l, err := acquire(n, elector.Lease{})
			if err != nil {
				b.Fatal(err)
			}
			leases[i] = l
		}
		k := 0
		for b.Loop() {
			l, err := acquire(names[k], leases[k])
			if err != nil {
				// Another run of this benchmark (-count) took it over
				// since: take over what it left. (held is declared only
				// here: its address escapes, so it allocates.)
				if held := (*elector.HeldError)(nil); errors.As(err, &held) {
					l, err = acquire(names[k], held.Lease)
				}
			}
			if err != nil {
				b.Fatal(err)
			}
			leases[k] = l
			if k++; k == len(names) { // not k % len(names): a division costs as much as a map access
				k = 0
			}
		}
	}
}

// v1MemoryStore is elector.MemoryStore as of commit aa3ab47 (git show
// aa3ab47:elector/memory.go), the model of expiry timestamps, without its
// release watchers (no benchmark uses them): TryAcquire, Renew and Get
// with the same checks, mutex, map and clock reads. Its lease has the
// fields of that version's elector.Lease.
type v1MemoryStore struct {
	mu     sync.Mutex
	leases map[string]v1Lease
}

type v1Lease struct {
	Name, Holder string
	Token        uint64
	ExpiresAt    time.Time
}

// v1HeldError is that version's elector.HeldError.
type v1HeldError struct{ Lease v1Lease }

func (e *v1HeldError) Error() string {
	return fmt.Sprintf("lease %q is held by %q (token %d)", e.Lease.Name, e.Lease.Holder, e.Lease.Token)
}

func (e *v1HeldError) Is(target error) bool { return target == elector.ErrHeld }

func newV1MemoryStore() *v1MemoryStore {
	return &v1MemoryStore{leases: make(map[string]v1Lease)}
}

func (m *v1MemoryStore) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration) (v1Lease, error) {
	if err := v1CheckArgs(ctx, name, ttl); err != nil {
		return v1Lease{}, err
	}
	if err := elector.ValidateHolder(holder); err != nil {
		return v1Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	cur, ok := m.leases[name]
	if ok && cur.ExpiresAt.After(now) {
		return v1Lease{}, &v1HeldError{Lease: cur}
	}
	l := v1Lease{Name: name, Holder: holder, Token: cur.Token + 1, ExpiresAt: now.Add(ttl)}
	m.leases[name] = l
	return l, nil
}

func (m *v1MemoryStore) Renew(ctx context.Context, l v1Lease, ttl time.Duration) (v1Lease, error) {
	if err := v1CheckArgs(ctx, l.Name, ttl); err != nil {
		return v1Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	cur, ok := m.leases[l.Name]
	if !ok || cur.Token != l.Token || cur.Holder != l.Holder || !cur.ExpiresAt.After(now) {
		return v1Lease{}, fmt.Errorf("renew lease %q token %d: %w", l.Name, l.Token, elector.ErrLeaseLost)
	}
	cur.ExpiresAt = now.Add(ttl)
	m.leases[l.Name] = cur
	return cur, nil
}

func (m *v1MemoryStore) Get(ctx context.Context, name string) (v1Lease, error) {
	if err := v1CheckArgs(ctx, name, time.Second); err != nil {
		return v1Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.leases[name]
	if !ok || !cur.ExpiresAt.After(time.Now()) {
		return v1Lease{}, fmt.Errorf("lease %q: %w", name, elector.ErrNoLease)
	}
	return cur, nil
}

func v1CheckArgs(ctx context.Context, name string, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := elector.ValidateName(name); err != nil {
		return err
	}
	return elector.ValidateTTL(ttl)
}
