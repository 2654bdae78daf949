package sqlitelease_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// TestSideFilesFollowDatabase: SQLite gives the -wal and -shm files it
// creates the database file's mode (whatever the umask) and, as root, its
// owner, so that a file shared by a group stays usable by the group. The
// -live file must get them too.
func TestSideFilesFollowDatabase(t *testing.T) {
	const mode = 0o660 // the group may write, which the usual umask 022 would take away
	defer syscall.Umask(syscall.Umask(0o022))
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o777))
	path := filepath.Join(dir, "shared.db")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	require.NoError(t, os.Chmod(path, mode))
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		uid, gid = 4242, 4343
		require.NoError(t, os.Chown(path, uid, gid))
	}

	s := openPath(t, path)
	_, err := s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{}) // writes, so -wal and -shm exist
	require.NoError(t, err)
	for _, suffix := range []string{"-wal", "-shm", "-live"} {
		fi, err := os.Stat(path + suffix)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(mode), fi.Mode().Perm(), "mode of %s", suffix)
		st := fi.Sys().(*syscall.Stat_t)
		assert.Equal(t, [2]int{uid, gid}, [2]int{int(st.Uid), int(st.Gid)}, "owner of %s", suffix)
	}
}
