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

// TestLiveFileDamagedWhileRunning damages the liveness file under running
// Stores. Its mark is a floor only, which the database's own high-water
// mark backs: the Stores must go on acquiring, with tokens that still grow,
// and a Store opened afterwards must accept the file.
func TestLiveFileDamagedWhileRunning(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(live string) error
	}{
		{"overwritten", func(live string) error { return os.WriteFile(live, []byte("x\n"), 0o600) }},
		{"truncated", func(live string) error { return os.Truncate(live, 3) }},
		{"emptied", func(live string) error { return os.Truncate(live, 0) }},
		{"replaced", func(live string) error {
			if err := os.WriteFile(live+".new", nil, 0o600); err != nil {
				return err
			}
			return os.Rename(live+".new", live)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "app.db")
			a := openPath(t, path)
			first, err := a.TryAcquire(bg(t), "x", "a", time.Minute, elector.Lease{})
			require.NoError(t, err)

			require.NoError(t, tc.damage(path+"-live"))

			next, err := a.TryAcquire(bg(t), "y", "a", time.Minute, elector.Lease{})
			require.NoError(t, err, "an unreadable mark must not stop acquires")
			require.Greater(t, next.Token, first.Token)
			b := openPath(t, path)
			last, err := b.TryAcquire(bg(t), "z", "b", time.Minute, elector.Lease{})
			require.NoError(t, err)
			require.Greater(t, last.Token, next.Token)
			require.Equal(t, last.Token, liveMark(t, path), "the mark is whole again")
		})
	}
}
