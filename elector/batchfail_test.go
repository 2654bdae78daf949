package elector_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// slowBatchStore is a memory store whose RenewMany renews every term but
// those of the names in slow, waits for its context to end while one of
// them is in the call (a row that a fenced write locks), and then returns
// the terms it renewed with the context's error.
type slowBatchStore struct {
	*elector.MemoryStore
	slow map[string]bool
}

func (s *slowBatchStore) RenewMany(ctx context.Context, terms []elector.Lease) ([]elector.Lease, error) {
	var fast []elector.Lease
	var idx []int
	for i, l := range terms {
		if !s.slow[l.Name] {
			fast, idx = append(fast, l), append(idx, i)
		}
	}
	got, err := s.MemoryStore.RenewMany(ctx, fast)
	if err != nil {
		return nil, err
	}
	out := make([]elector.Lease, len(terms))
	for j, i := range idx {
		out[i] = got[j]
	}
	if len(fast) < len(terms) {
		<-ctx.Done()
		return out, ctx.Err()
	}
	return out, nil
}

// TestFailedBatchKeepsItsRenewals: a RenewMany that fails because one of
// its terms is slow, but reports the others renewed, ends only the slow
// term; the others keep renewing in the same calls.
func TestFailedBatchKeepsItsRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &slowBatchStore{MemoryStore: elector.NewMemoryStore(), slow: map[string]bool{"slow": true}}
		var terms []elector.Term
		for _, name := range []string{"slow", "other"} {
			e, err := elector.New(s, name, fast)
			require.NoError(t, err)
			term := campaign(t, e)
			t.Cleanup(func() { _ = term.Resign(context.Background()) })
			terms = append(terms, term)
		}
		slow, other := terms[0], terms[1]
		start := time.Now()
		<-slow.Done()
		assert.Equal(t, fast.TTL-elector.SafetyMargin(fast.TTL), time.Since(start), "the slow term ends at its trust window")
		time.Sleep(10 * time.Second)
		require.NoError(t, other.Err(), "the other term of the same calls")
		assert.Greater(t, other.Lease().Version, uint64(8), "renewed about every second")
	})
}
