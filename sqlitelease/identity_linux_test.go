package sqlitelease_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/helperproc"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// requireSecondPath asserts that err refuses a second path to the file.
func requireSecondPath(t *testing.T, err error, contains ...string) {
	t.Helper()
	require.ErrorIs(t, err, sqlitelease.ErrSecondPath)
	t.Log(err)
	for _, s := range append(contains, "mount or share the directory") {
		assert.Contains(t, err.Error(), s)
	}
}

// openRefused asserts that Open(path) is refused as a second path.
func openRefused(t *testing.T, path string, contains ...string) {
	t.Helper()
	requireSecondPath(t, openFails(t, path), contains...)
}

// openFails asserts that Open(path) fails with an error that names path
// and holds each of contains, and returns the error.
func openFails(t *testing.T, path string, contains ...string) error {
	t.Helper()
	s, err := sqlitelease.Open(path)
	if err == nil {
		_ = s.Close()
		t.Fatalf("Open(%q) succeeded", path)
	}
	for _, c := range append(contains, path) {
		assert.Contains(t, err.Error(), c)
	}
	return err
}

// TestHardLinkRefused: a hard link in another directory is a second path
// to the file, with its own -wal and -shm. Open refuses the file through
// either name, and a Store opened before the link was made refuses to
// write: its holder's next renewal ends the term.
func TestHardLinkRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	link := filepath.Join(t.TempDir(), "app.db")
	s := openPath(t, path)
	l, err := s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, os.Link(path, link))

	openRefused(t, link, "2 names")
	openRefused(t, path, "2 names")
	_, err = s.Renew(bg(t), l, time.Minute)
	requireSecondPath(t, err, "2 names")
	require.ErrorIs(t, err, elector.ErrLeaseLost)
	_, err = s.TryAcquire(bg(t), "other", "a", time.Minute, elector.Lease{})
	requireSecondPath(t, err)
	err = s.FencedLease(bg(t), l, func(context.Context, *sql.Tx) error { return nil })
	requireSecondPath(t, err)
	require.ErrorIs(t, err, elector.ErrLeaseLost)

	require.NoError(t, os.Remove(link))
	_, err = s.TryAcquire(bg(t), "other", "a", time.Minute, elector.Lease{})
	require.NoError(t, err, "one name again")
}

// TestMovedFileRefused moves the file to another directory while a Store
// has it open: the Store's SQLite connections keep their write-ahead log
// in the old directory, so a Store that opens the new path must be refused
// (by the Store's lock on the file, the link count being 1) until the old
// Store closes.
func TestMovedFileRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	moved := filepath.Join(t.TempDir(), "app.db")
	old, err := sqlitelease.Open(path)
	require.NoError(t, err)
	_, err = old.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, os.Rename(path, moved))

	openRefused(t, moved, "another directory or name")
	require.NoError(t, old.Close())
	openPath(t, moved)
}

// TestDirectoryReplacedUnderStore replaces the file's directory with a new
// one and moves the file into it (mv data data.old; mkdir data; mv
// data.old/app.db data/): the path names the same file, but its -wal and
// -shm stayed behind, so the Store's new connections failed ("disk I/O
// error") while it kept renewing, and every other Store was refused. The
// file changed place: the Store's next write ends its term.
func TestDirectoryReplacedUnderStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.Mkdir(dir, 0o700))
	path := filepath.Join(dir, "app.db")
	s := openPath(t, path)
	l, err := s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)

	require.NoError(t, os.Rename(dir, dir+".old"))
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.Rename(filepath.Join(dir+".old", "app.db"), path))
	_, err = s.Renew(bg(t), l, time.Minute)
	t.Log(err)
	require.ErrorIs(t, err, sqlitelease.ErrFileChanged)
	require.ErrorIs(t, err, elector.ErrLeaseLost)
	assert.Contains(t, err.Error(), "directory")
}

// TestSecondStoreKeepsSQLiteLocks: Stores of one process on one file, which
// must work, never close a descriptor of the file while another has it
// open: a close drops every POSIX lock the process holds on the file,
// including the SHARED lock that SQLite's connections keep on it in WAL
// mode (another process would then take the file for unused, checkpoint it
// and delete the write-ahead log under them).
func TestSecondStoreKeepsSQLiteLocks(t *testing.T) {
	path, locked := sharedLockProbe(t)
	first := openPath(t, path)
	_, err := first.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.True(t, locked(), "SQLite's SHARED lock of the first Store")

	second, err := sqlitelease.Open(path)
	require.NoError(t, err)
	assert.True(t, locked(), "after a second Store opened the file")
	require.NoError(t, second.Close())
	assert.True(t, locked(), "after the second Store closed")
}

// TestCloseKeepsOtherConnectionsLocks: the job's own connections to the
// file (an *sql.DB of its own, say) keep their SQLite locks when the last
// Store of the process closes, as they do when a second Store closes: a
// descriptor of the file stays open until no connection of the process has
// a lock on it. It closes then, at the next Open or Close of a Store.
func TestCloseKeepsOtherConnectionsLocks(t *testing.T) {
	path, locked := sharedLockProbe(t)
	jobDB, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)")
	require.NoError(t, err)
	_, err = jobDB.Exec("CREATE TABLE IF NOT EXISTS job_data (x)")
	require.NoError(t, err)
	require.True(t, locked(), "the job connection's SHARED lock")

	s, err := sqlitelease.Open(path)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	assert.True(t, locked(), "after the only Store closed")

	require.NoError(t, jobDB.Close())
	s, err = sqlitelease.Open(filepath.Join(t.TempDir(), "other.db"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	assert.Equal(t, 1, descriptorsOf(t, path), "the probe's alone, once no connection has the file")
}

// sharedLockProbe creates an empty file and returns its path and a function
// that reports whether a process holds a read lock on SQLite's SHARED range
// of it. The probe's descriptor holds no lock, so that it sees this
// process's too; it is open before the Stores and closed at cleanup, after
// them, as its close drops the process's locks too.
func sharedLockProbe(t *testing.T) (path string, locked func() bool) {
	const sharedFirst, sharedSize = 0x40000000 + 2, 510 // SQLite's SHARED lock range in os_unix.c
	path = filepath.Join(t.TempDir(), "app.db")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	probe, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, unix.Close(probe)) })
	return path, func() bool {
		lk := unix.Flock_t{Type: unix.F_WRLCK, Start: sharedFirst, Len: sharedSize}
		require.NoError(t, unix.FcntlFlock(uintptr(probe), unix.F_OFD_GETLK, &lk))
		return lk.Type == unix.F_RDLCK
	}
}

// descriptorsOf counts the descriptors of this process open on path.
func descriptorsOf(t *testing.T, path string) int {
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == path {
			n++
		}
	}
	return n
}

// The helper mode mount (see TestMain) runs in a mount namespace of its
// own.
func init() { helpers = map[string]func([]string) error{"mount": mountChild} }

// mountChild bind-mounts args[0] on args[1], opens a Store on args[2],
// tries to take the lease "job" as "child", prints the outcome as one line
// ("refused: <error>", "acquired <token>" or "held by <holder>"), and keeps
// the Store open until its stdin closes.
func mountChild(args []string) error {
	if err := syscall.Mount(args[0], args[1], "", syscall.MS_BIND, ""); err != nil {
		fmt.Println("mount:", err)
		return err
	}
	s, err := sqlitelease.Open(args[2])
	if err != nil {
		fmt.Printf("refused: %v (second path: %t)\n", err, errors.Is(err, sqlitelease.ErrSecondPath))
		return nil
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := s.TryAcquire(ctx, "job", "child", 15*time.Second, elector.Lease{})
	var held *elector.HeldError
	switch {
	case errors.As(err, &held):
		fmt.Printf("held by %s\n", held.Lease.Holder)
	case err != nil:
		fmt.Println("error:", err)
	default:
		fmt.Printf("acquired %d\n", l.Token)
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// startMountChild runs mountChild in a new mount namespace and returns the
// line it printed and its process id. It skips the test where no mount
// namespace can be made. The child ends at cleanup.
func startMountChild(t *testing.T, src, dst, open string) (line string, pid int) {
	t.Helper()
	cmd := helperproc.Command(t, "mount", src, dst, open)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS} // and mounts / private
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	if err := cmd.Start(); errors.Is(err, syscall.EPERM) {
		t.Skipf("cannot start a process in a mount namespace of its own (needs CAP_SYS_ADMIN): %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	line, err = bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "the child printed %q", line)
	if strings.HasPrefix(line, "mount: ") {
		t.Skipf("cannot bind-mount in a mount namespace of its own: %s", line)
	}
	return strings.TrimSpace(line), cmd.Process.Pid
}

// TestBindMountOfFileRefused bind-mounts the file alone into another
// directory, as docker run -v /host/app.db:/data/app.db does: the link
// count stays 1, but a Store through each path would keep its own
// write-ahead log. Whichever path opens second is refused, so two Stores
// on the two paths never both hold the lease.
func TestBindMountOfFileRefused(t *testing.T) {
	setUp := func(t *testing.T) (path, mounted string) {
		path = filepath.Join(t.TempDir(), "app.db")
		mounted = filepath.Join(t.TempDir(), "app.db")
		require.NoError(t, os.WriteFile(mounted, nil, 0o600)) // the mount point
		return path, mounted
	}
	t.Run("mounted path second", func(t *testing.T) {
		path, mounted := setUp(t)
		s := openPath(t, path)
		_, err := s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
		require.NoError(t, err)
		line, _ := startMountChild(t, path, mounted, mounted)
		t.Log(line)
		assert.True(t, strings.HasPrefix(line, "refused: ") && strings.HasSuffix(line, "(second path: true)"),
			"the Store through the bind mount must be refused, not: %s", line)
		assert.Contains(t, line, "another directory or name")
	})
	t.Run("mounted path first", func(t *testing.T) {
		path, mounted := setUp(t)
		s, err := sqlitelease.Open(path) // create the file, then leave it to the child
		require.NoError(t, err)
		require.NoError(t, s.Close())
		line, _ := startMountChild(t, path, mounted, mounted)
		require.True(t, strings.HasPrefix(line, "acquired "), "the child alone: %s", line)
		openRefused(t, path, "another directory or name")
	})
}

// TestCloseWithConnectionInUse closes a Store while a job still has a
// connection of its pool (Close does not wait for it), then opens the file
// through a bind mount of it alone: the job's connection can still write
// through the first path's write-ahead log, so the second path stays
// refused until it closes.
func TestCloseWithConnectionInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	mounted := filepath.Join(t.TempDir(), "app.db")
	require.NoError(t, os.WriteFile(mounted, nil, 0o600)) // the mount point
	s, err := sqlitelease.Open(path)
	require.NoError(t, err)
	conn, err := s.DB().Conn(bg(t))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	line, _ := startMountChild(t, path, mounted, mounted)
	t.Log(line)
	assert.True(t, strings.HasPrefix(line, "refused: ") && strings.HasSuffix(line, "(second path: true)"),
		"a Store through the bind mount while the job's connection is open: %s", line)
	_, err = conn.ExecContext(bg(t), "CREATE TABLE job_data (x)")
	require.NoError(t, err, "the job's connection still writes")
	require.NoError(t, conn.Close())

	// The next Open of a Store (of any file) finds the connection closed.
	require.NoError(t, openPath(t, filepath.Join(t.TempDir(), "other.db")).Close())
	line, _ = startMountChild(t, path, mounted, mounted)
	assert.True(t, strings.HasPrefix(line, "acquired "), "once the job's connection closed: %s", line)
}

// TestBindMountOfDirectoryWorks: the fix the errors advise, a bind mount of
// the directory that holds the file, is one path: a Store through it shares
// the write-ahead log, and sees the lease the other holds.
func TestBindMountOfDirectoryWorks(t *testing.T) {
	dir, mounted := t.TempDir(), t.TempDir()
	s := openPath(t, filepath.Join(dir, "app.db"))
	_, err := s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	line, _ := startMountChild(t, dir, mounted, filepath.Join(mounted, "app.db"))
	assert.Equal(t, "held by a", line)
}

// TestOpenThroughOtherMountNamespace opens a file through another process's
// root (/proc/PID/root, as a tool on the host reaches into a container): a
// link that names no path in this process's view, so resolving it gives
// another file. Open refuses it, naming what to do, and creates nothing
// where the link seemed to lead (it created a file there, and then said
// that the path kept naming another file).
func TestOpenThroughOtherMountNamespace(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	line, pid := startMountChild(t, src, dst, filepath.Join(dst, "app.db")) // the child's dst is src
	require.True(t, strings.HasPrefix(line, "acquired "), "the child: %s", line)

	path := fmt.Sprintf("/proc/%d/root%s/app.db", pid, dst)
	t.Log(openFails(t, path, "by its own path"))
	assert.Equal(t, int64(-1), fileSize(t, filepath.Join(dst, "app.db")), "nothing created where the link seemed to lead")
}
