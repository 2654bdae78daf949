package sqlitelease_test

import (
	"context"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// liveMark reads the token high-water mark in the liveness file of the
// database at path (0 if the file is empty).
func liveMark(t *testing.T, path string) uint64 {
	t.Helper()
	b, err := os.ReadFile(path + "-live")
	require.NoError(t, err)
	if len(b) == 0 {
		return 0
	}
	require.Len(t, b, 8)
	return binary.BigEndian.Uint64(b)
}

// setLiveMark writes mark into the liveness file of the database at path,
// as a Store of another database file at that path (one deleted meanwhile)
// would.
func setLiveMark(t *testing.T, path string, mark uint64) {
	t.Helper()
	f, err := os.OpenFile(path+"-live", os.O_WRONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt(binary.BigEndian.AppendUint64(nil, mark), 0)
	require.NoError(t, err)
}

// TestMarkFollowsTokens: the mark is the largest token issued through the
// liveness file, whichever Store issued it; refused acquires and renewals
// leave it alone.
func TestMarkFollowsTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	a, b := openPath(t, path), openPath(t, path)
	assert.Zero(t, liveMark(t, path), "a new file has no mark")
	la, err := a.TryAcquire(bg(t), "x", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	assert.Equal(t, la.Token, liveMark(t, path))
	lb, err := b.TryAcquire(bg(t), "y", "b", time.Minute, elector.Lease{})
	require.NoError(t, err)
	assert.Equal(t, lb.Token, liveMark(t, path))

	requireHeld(t, b, "x", "b")
	_, err = a.Renew(bg(t), la, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, lb.Token, liveMark(t, path))
}

// TestMarkFloorsTokens: a new token exceeds the mark, read at every
// acquire, even one that a Store of another database file at this path
// left there and this file does not know of.
func TestMarkFloorsTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	s := openPath(t, path)
	l := acquireReleased(t, s, "job", "a")
	high := l.Token + 1_000_000_000_000 // 11.6 days of clock ahead
	setLiveMark(t, path, high)
	next, err := s.TryAcquire(bg(t), "job", "b", time.Minute, elector.Lease{})
	require.NoError(t, err)
	assert.Equal(t, high+1, next.Token)
	assert.Equal(t, next.Token, liveMark(t, path))
}

// TestMarkUnusableTakesNothing: an acquire that cannot use the mark (here:
// its Store's liveness file is closed) fails, names the file, and takes
// nothing. (The internal TestIssueRaiseFailsRollsBack fails the raise after
// the statement ran.)
func TestMarkUnusableTakesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	a, b := openPath(t, path), openPath(t, path)
	before := acquireReleased(t, b, "job", "b")
	require.NoError(t, sqlitelease.Die(a)) // closes a's liveness file
	_, err := a.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.Error(t, err)
	t.Log(err)
	assert.Contains(t, err.Error(), path+"-live")
	_, err = b.Get(bg(t), "job")
	require.ErrorIs(t, err, elector.ErrNoLease, "the lease must stay free")
	assert.Equal(t, before.Token, liveMark(t, path))
	l, err := b.TryAcquire(bg(t), "job", "b", time.Minute, elector.Lease{})
	require.NoError(t, err)
	assert.Greater(t, l.Token, before.Token)
	_, err = a.Get(bg(t), "job")
	require.NoError(t, err, "a's lease connection still works")
}

// TestMarkLockedElsewhere: while something else keeps the mark's lock (byte
// 0 of the liveness file), an acquire waits for it until its context ends,
// takes nothing, and names the file; once the lock is gone it goes through.
// Liveness locks (at other bytes) are not in the way.
func TestMarkLockedElsewhere(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	s := openPath(t, path)
	fd, err := unix.Open(path+"-live", unix.O_RDWR|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: 0, Len: 1}
	require.NoError(t, unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk))

	ctx, cancel := context.WithTimeout(bg(t), 100*time.Millisecond)
	defer cancel()
	_, err = s.TryAcquire(ctx, "job", "a", time.Minute, elector.Lease{})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	t.Log(err)
	assert.Contains(t, err.Error(), path+"-live")
	_, err = s.Get(bg(t), "job")
	require.ErrorIs(t, err, elector.ErrNoLease)

	done := make(chan error, 1)
	go func() {
		_, err := s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	lk.Type = unix.F_UNLCK
	require.NoError(t, unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the acquire did not go through once the lock was gone")
	}
}

// TestMarkOfOlderRelease: a liveness file left empty by an older release is
// accepted, and Open records the file's high-water mark in it.
func TestMarkOfOlderRelease(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	s, err := sqlitelease.Open(path)
	require.NoError(t, err)
	l := acquireReleased(t, s, "job", "a")
	require.NoError(t, s.Close())
	require.NoError(t, os.Truncate(path+"-live", 0))
	openPath(t, path)
	assert.Equal(t, l.Token, liveMark(t, path))
}
