package sqlitelease_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/sqlitelease"
)

// TestConcurrentOpenOfNewFile opens one new file from many stores at once,
// as replicas starting together on a fresh host do: every Open succeeds.
func TestConcurrentOpenOfNewFile(t *testing.T) {
	dir := t.TempDir()
	for round := range 20 {
		path := filepath.Join(dir, fmt.Sprintf("round-%d.db", round))
		var wg sync.WaitGroup
		errs := make([]error, 8)
		stores := make([]*sqlitelease.Store, 8)
		for i := range stores {
			wg.Go(func() { stores[i], errs[i] = sqlitelease.Open(path) })
		}
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, "round %d, store %d", round, i)
			require.NoError(t, stores[i].Close())
		}
	}
}
