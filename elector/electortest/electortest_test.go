package electortest

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/leaderaware/leaderaware/elector"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestLinearizableCheck checks the check: it passes the memory store and
// catches stores that break the contract under concurrency.
func TestLinearizableCheck(t *testing.T) {
	tests := []struct {
		name  string
		store func() elector.Store
		ok    bool
	}{
		{"MemoryStore", func() elector.Store { return elector.NewMemoryStore() }, true},
		{"UnknownOutcomes", func() elector.Store { return lossy{elector.NewMemoryStore()} }, true},
		{"TakeoverIgnoresVersion", func() elector.Store { return tokenOnlyCAS{elector.NewMemoryStore()} }, false},
		{"HeldErrorMissesRenewals", func() elector.Store { return &staleHeld{Store: elector.NewMemoryStore()} }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, viz := checkLinearizable(t, tt.store(), "electortest/linearizable")
			assert.Equal(t, tt.ok, ok, "linearizable")
			if !ok {
				info, err := os.Stat(viz)
				if assert.NoError(t, err, "the visualization") {
					assert.NotZero(t, info.Size(), "the visualization")
					os.Remove(viz)
				}
			}
		})
	}
}

// tokenOnlyCAS takes over a lease whose token the candidate observed, even
// if its holder renewed since: its compare-and-set ignores the Version.
type tokenOnlyCAS struct{ elector.Store }

func (s tokenOnlyCAS) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	if cur, err := s.Get(ctx, name); err == nil && observed.Token != 0 && cur.Token == observed.Token {
		observed = cur
	}
	return s.Store.TryAcquire(ctx, name, holder, ttl, observed)
}

// staleHeld reports in its HeldError the lease as it was acquired, from a
// cache that renewals do not update.
type staleHeld struct {
	elector.Store
	mu       sync.Mutex
	acquired elector.Lease
}

func (s *staleHeld) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	l, err := s.Store.TryAcquire(ctx, name, holder, ttl, observed)
	s.mu.Lock()
	defer s.mu.Unlock()
	var held *elector.HeldError
	switch {
	case err == nil:
		s.acquired = l
	case errors.As(err, &held) && held.Lease.Token == s.acquired.Token:
		return elector.Lease{}, &elector.HeldError{Lease: s.acquired}
	}
	return l, err
}

// lossy fails one operation in 20 with an error, half of them after the
// operation took effect, like a store whose connection breaks before the
// reply arrives.
type lossy struct{ elector.Store }

var errLost = errors.New("connection lost")

// fail returns errLost for one call in 20, and whether to do the operation
// anyway.
func (lossy) fail() (err error, apply bool) {
	if rand.IntN(20) != 0 {
		return nil, true
	}
	return errLost, rand.IntN(2) == 0
}

func (s lossy) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	err, apply := s.fail()
	if !apply {
		return elector.Lease{}, err
	}
	l, err2 := s.Store.TryAcquire(ctx, name, holder, ttl, observed)
	return l, cmp.Or(err, err2)
}

func (s lossy) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	err, apply := s.fail()
	if !apply {
		return elector.Lease{}, err
	}
	r, err2 := s.Store.Renew(ctx, l, ttl)
	return r, cmp.Or(err, err2)
}

func (s lossy) Release(ctx context.Context, l elector.Lease) error {
	err, apply := s.fail()
	if !apply {
		return err
	}
	return cmp.Or(err, s.Store.Release(ctx, l))
}

func (s lossy) Get(ctx context.Context, name string) (elector.Lease, error) {
	err, apply := s.fail()
	if !apply {
		return elector.Lease{}, err
	}
	l, err2 := s.Store.Get(ctx, name)
	return l, cmp.Or(err, err2)
}
