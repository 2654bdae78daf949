package sqlitelease_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// fileSize returns the size of the file at path, or -1 if there is none.
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if os.IsNotExist(err) {
		return -1
	}
	require.NoError(t, err)
	return fi.Size()
}

// TestOpenThroughSymlink opens, through a symbolic link in another
// directory, a database that a holder process uses. SQLite keeps the -wal
// and -shm files next to the link's target, so every check that looks next
// to the file must look there: Open works on the target, and refuses a
// target emptied under the holder (as it does without the link) instead of
// starting a database next to the holder's write-ahead log and emptying it.
func TestOpenThroughSymlink(t *testing.T) {
	setUp := func(t *testing.T) (target, link string) {
		target = filepath.Join(t.TempDir(), "app.db")
		link = filepath.Join(t.TempDir(), "app.db")
		require.NoError(t, os.Symlink(target, link))
		startHolder(t, target, 15*time.Second)
		return target, link
	}
	t.Run("in use", func(t *testing.T) {
		target, link := setUp(t)
		s := openPath(t, link)
		held := requireHeld(t, s, "job", "candidate")
		assert.True(t, strings.HasPrefix(held.Holder, "child-"), "the holder's lease, in the holder's write-ahead log: %+v", held)
		for _, suffix := range []string{"-wal", "-shm", "-live"} {
			assert.Equal(t, int64(-1), fileSize(t, link+suffix), "no %s next to the link", suffix)
		}
		assert.Positive(t, fileSize(t, target+"-wal"))
	})
	for _, tc := range []struct {
		name  string
		empty func(path string) error
	}{
		{"target truncated", func(path string) error { return os.Truncate(path, 0) }},
		{"target deleted", os.Remove},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target, link := setUp(t)
			wal := fileSize(t, target+"-wal")
			require.Positive(t, wal)
			require.NoError(t, tc.empty(target))

			start := time.Now()
			s, err := sqlitelease.Open(link)
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded")
			}
			t.Log(err)
			assert.Less(t, time.Since(start), 2*time.Second, "Open must not wait for the holder's locks")
			assert.Contains(t, err.Error(), link)
			assert.Contains(t, err.Error(), "truncated or deleted while a process had it open")
			assert.Equal(t, wal, fileSize(t, target+"-wal"), "the holder's write-ahead log must stay as it was")
		})
	}
}

// TestOpenLongPath: SQLite refuses a file whose path, with the 8 bytes of
// its "-journal" suffix, is over its 512-byte limit. Open names the limit,
// and creates nothing; a path at the limit works.
func TestOpenLongPath(t *testing.T) {
	// pathOf returns a path of n bytes in a new directory.
	pathOf := func(n int) string {
		dir := t.TempDir()
		for len(dir)+1+200+1+len("x.db") < n {
			dir = filepath.Join(dir, strings.Repeat("d", 200))
		}
		dir = filepath.Join(dir, strings.Repeat("d", n-len(dir)-1-1-len("x.db")))
		require.NoError(t, os.MkdirAll(dir, 0o700))
		path := filepath.Join(dir, "x.db")
		require.Len(t, path, n)
		return path
	}
	const limit = 512 - len("-journal")

	s := openPath(t, pathOf(limit))
	_, err := s.Get(bg(t), "job")
	require.Error(t, err, "no lease yet")

	path := pathOf(limit + 1)
	s, err = sqlitelease.Open(path)
	if err == nil {
		_ = s.Close()
		t.Fatal("Open succeeded")
	}
	t.Log(err)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "512")
	assert.NotContains(t, err.Error(), "-wal")
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	assert.Empty(t, entries, "Open must create nothing")
}

// TestOpenDotDotAfterSymlink: a ".." after a symbolic link is the parent of
// the link's target, for the kernel and for SQLite's own tools, not the
// link's directory, as filepath.Clean would have it. A relative path
// resolves against the kernel's working directory, whatever $PWD says:
// two processes in one directory, one started from a shell that reached
// it through a link (PWD names the link) and one without PWD, each took
// the lease in a file of its own.
func TestOpenDotDotAfterSymlink(t *testing.T) {
	root := t.TempDir()
	for _, dir := range []string{"releases/1", "releases/shared", "shared", "x/y"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, dir), 0o755))
	}
	current := filepath.Join(root, "current") // as deploy tools make it
	require.NoError(t, os.Symlink(filepath.Join(root, "releases", "1"), current))
	kernels := filepath.Join(root, "releases", "shared", "app.db")

	t.Run("relative, PWD through the link", func(t *testing.T) {
		t.Chdir(current)
		t.Setenv("PWD", current)
		shell := openPath(t, "../shared/app.db")
		_, err := shell.TryAcquire(bg(t), "job", "shell", time.Minute, elector.Lease{})
		require.NoError(t, err)
		require.NoError(t, os.Unsetenv("PWD"))
		requireHeld(t, openPath(t, "../shared/app.db"), "job", "no PWD")
		requireHeld(t, openPath(t, kernels), "job", "kernel's path")
	})
	t.Run("absolute", func(t *testing.T) {
		s := openPath(t, current+"/../shared/other.db")
		_, err := s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
		require.NoError(t, err)
		requireHeld(t, openPath(t, filepath.Join(root, "releases", "shared", "other.db")), "job", "kernel's path")
		assert.Equal(t, int64(-1), fileSize(t, filepath.Join(root, "shared", "other.db")))
	})
	t.Run("in a link's target", func(t *testing.T) {
		require.NoError(t, os.Symlink(filepath.Join(root, "x", "y"), filepath.Join(root, "sub")))
		link := filepath.Join(root, "link.db")
		require.NoError(t, os.Symlink("sub/../target.db", link)) // root/x/target.db
		s := openPath(t, link)
		_, err := s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
		require.NoError(t, err)
		requireHeld(t, openPath(t, filepath.Join(root, "x", "target.db")), "job", "kernel's path")
	})
}
