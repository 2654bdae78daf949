package sqlitelease_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// TestWALStaysBounded checks that lease traffic alone lets SQLite's WAL
// auto-checkpoint run (every 1000 pages), so the -wal file stays a few MB.
// Writes with RETURNING that are not stepped to completion commit without
// it, and the WAL then grows by a page or two per renewal, forever.
func TestWALStaysBounded(t *testing.T) {
	const limit = 8 << 20 // auto-checkpoint keeps it near 4 MB
	path := filepath.Join(t.TempDir(), "leases.db")
	s := openPath(t, path)
	walSize := func() int64 {
		fi, err := os.Stat(path + "-wal")
		require.NoError(t, err)
		return fi.Size()
	}

	for i := range 3000 { // acquires: inserts, through RETURNING
		_, err := s.TryAcquire(bg(t), fmt.Sprintf("job/%d", i), "a", time.Hour, elector.Lease{})
		require.NoError(t, err)
	}
	require.Less(t, walSize(), int64(limit), "after 3000 acquires")

	l, err := s.TryAcquire(bg(t), "renewed", "a", time.Hour, elector.Lease{})
	require.NoError(t, err)
	for range 5000 { // renewals: updates, through RETURNING
		l, err = s.Renew(bg(t), l, time.Hour)
		require.NoError(t, err)
	}
	require.Less(t, walSize(), int64(limit), "after 5000 renewals")
}
