package sqlitelease_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// TestCloseWhilePathAbsent closes a holder while its database file is away
// from the path for a moment (`mv app.db x; mv x app.db`). Close must still
// clear the liveness records of its leases, on the connection that has the
// file open, before it drops its lock: another Store must not take the
// unexpired term at once once the file is back.
func TestCloseWhilePathAbsent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	away := path + ".away"
	holder, err := sqlitelease.Open(path)
	require.NoError(t, err)
	_, err = holder.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)

	require.NoError(t, os.Rename(path, away))
	require.NoError(t, holder.Close())
	require.NoError(t, os.Rename(away, path))

	requireHeld(t, openPath(t, path), "job", "b")
}
