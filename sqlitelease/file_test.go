package sqlitelease_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// removeDB removes the database file at path with its -wal and -shm files,
// as `rm app.db app.db-wal app.db-shm` does.
func removeDB(t *testing.T, path string) {
	t.Helper()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		require.NoError(t, os.Remove(path+suffix))
	}
}

// TestFileChangedUnderHolder changes the file under a store that holds a
// lease. The store must not go on working on a file other processes no
// longer see: its holder's next renewal ends the term, and its other
// operations fail until it is reopened.
func TestFileChangedUnderHolder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, path string)
		why    string
	}{
		{"deleted", removeDB, "no file is at the path"},
		{"replaced", func(t *testing.T, path string) {
			// Another lease file is moved over it, as a restore would do.
			other := filepath.Join(t.TempDir(), "other.db")
			s, err := sqlitelease.Open(other)
			require.NoError(t, err)
			require.NoError(t, s.Close())
			require.NoError(t, os.Rename(other, path))
		}, "the path now names another file"},
		{"truncated", func(t *testing.T, path string) {
			require.NoError(t, os.Truncate(path, 0))
		}, "the file is now empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "app.db")
			s := openPath(t, path)
			l, err := s.TryAcquire(bg(t), "job", "old", time.Minute, elector.Lease{})
			require.NoError(t, err)

			tc.change(t, path)

			_, err = s.Renew(bg(t), l, time.Minute)
			t.Log(err)
			require.ErrorIs(t, err, elector.ErrLeaseLost, "the term must end")
			require.ErrorIs(t, err, sqlitelease.ErrFileChanged)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), tc.why)

			_, err = s.TryAcquire(bg(t), "job", "old", time.Minute, elector.Lease{})
			t.Log(err)
			require.ErrorIs(t, err, sqlitelease.ErrFileChanged)
			assert.NotErrorIs(t, err, elector.ErrHeld)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), "open the path again")

			_, err = s.Get(bg(t), "job")
			require.ErrorIs(t, err, sqlitelease.ErrFileChanged)
			require.ErrorIs(t, s.Release(bg(t), l), sqlitelease.ErrFileChanged)
			_, err = s.List(bg(t))
			require.ErrorIs(t, err, sqlitelease.ErrFileChanged)
			err = s.FencedLease(bg(t), l, func(context.Context, *sql.Tx) error { return nil })
			require.ErrorIs(t, err, elector.ErrLeaseLost, "the job's writes would go to a file nobody reads")
			require.ErrorIs(t, err, sqlitelease.ErrFileChanged)
		})
	}
}

// TestFileDeletedUnderHolder is the whole story of a deleted file: a new
// store on the path starts a new file, whose tokens still exceed the old
// file's, and the old holder's renewal fails instead of renewing a lease
// in the unlinked file. On Linux, where the new store can tell that the old
// holder's Store still runs (and so may its job), it takes the lease by the
// elapsed-time rule only (see TestFileDeletedFreshStoreWaits).
func TestFileDeletedUnderHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	old := openPath(t, path)
	l, err := old.TryAcquire(bg(t), "job", "old", time.Minute, elector.Lease{})
	require.NoError(t, err)

	removeDB(t, path)
	fresh := openPath(t, path)
	next, err := fresh.TryAcquire(bg(t), "job", "new", time.Minute, elector.Lease{})
	if held := (*elector.HeldError)(nil); errors.As(err, &held) {
		next, err = fresh.TryAcquire(bg(t), "job", "new", time.Minute, held.Lease)
	}
	require.NoError(t, err)
	assert.Greater(t, next.Token, l.Token, "tokens of the new file must exceed the deleted file's")

	_, err = old.Renew(bg(t), l, time.Minute)
	require.ErrorIs(t, err, elector.ErrLeaseLost, "the old holder must not go on renewing in the deleted file")
}

// TestOpenEmptiedFile opens a file that was truncated, or deleted, while a
// process still had it open. Open must fail at once and say so, instead of
// waiting 30 s for that process's locks and blaming them ("truncated"), or
// starting a new file next to the old one's write-ahead log ("deleted").
func TestOpenEmptiedFile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		empty func(path string) error
	}{
		{"truncated", func(path string) error { return os.Truncate(path, 0) }},
		{"deleted", os.Remove},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "app.db")
			holder := openPath(t, path)
			_, err := holder.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
			require.NoError(t, err)
			require.NoError(t, tc.empty(path))

			start := time.Now()
			s, err := sqlitelease.Open(path)
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded")
			}
			t.Log(err)
			assert.Less(t, time.Since(start), 2*time.Second, "Open must not wait for the locks")
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), "truncated or deleted while a process had it open")
			assert.NotContains(t, err.Error(), "locked")
		})
	}
}

// TestFileChangedAfterRecentCheck changes the file right after a check of it
// passed. Reads may trust that check for a while (see the ErrFileChanged
// contract), but every write must still check the file: a Store never
// writes to a file other processes no longer see.
func TestFileChangedAfterRecentCheck(t *testing.T) {
	defer sqlitelease.SetReadRecheck(time.Hour)()
	path := filepath.Join(t.TempDir(), "app.db")
	s := openPath(t, path)
	l, err := s.TryAcquire(bg(t), "job", "old", time.Minute, elector.Lease{})
	require.NoError(t, err)
	_, err = s.Get(bg(t), "job")
	require.NoError(t, err)

	removeDB(t, path)

	_, err = s.Get(bg(t), "job")
	require.NoError(t, err, "a read trusts the check that just passed")
	// A candidate's call for a free lease reads first, then writes.
	_, err = s.TryAcquire(bg(t), "other", "old", time.Minute, elector.Lease{})
	require.ErrorIs(t, err, sqlitelease.ErrFileChanged, "the write after a read must check the file")
	_, err = s.TryAcquire(bg(t), "job", "new", time.Minute, l)
	require.ErrorIs(t, err, sqlitelease.ErrFileChanged)
	_, err = s.Renew(bg(t), l, time.Minute)
	require.ErrorIs(t, err, elector.ErrLeaseLost)
	require.ErrorIs(t, err, sqlitelease.ErrFileChanged)
	// A failed check is not trusted: reads report the change from now on.
	_, err = s.Get(bg(t), "job")
	require.ErrorIs(t, err, sqlitelease.ErrFileChanged)
	_, err = s.TryAcquire(bg(t), "job", "new", time.Minute, elector.Lease{})
	require.ErrorIs(t, err, sqlitelease.ErrFileChanged)
}

// TestFileChangedReadsRecheck changes the file under a store that only
// reads: once the last passing check is older than the recheck interval
// (zero here), its reads report the change too.
func TestFileChangedReadsRecheck(t *testing.T) {
	defer sqlitelease.SetReadRecheck(0)()
	path := filepath.Join(t.TempDir(), "app.db")
	holder := openPath(t, path)
	_, err := holder.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	s := openPath(t, path)
	_, err = s.Get(bg(t), "job")
	require.NoError(t, err)

	removeDB(t, path)

	_, err = s.Get(bg(t), "job")
	require.ErrorIs(t, err, sqlitelease.ErrFileChanged)
	_, err = s.TryAcquire(bg(t), "job", "b", time.Minute, elector.Lease{})
	require.ErrorIs(t, err, sqlitelease.ErrFileChanged)
	assert.NotErrorIs(t, err, elector.ErrHeld)
}

// TestFileReplacedDuringOpen replaces the file while Open sets up its
// connection, as a `rm` and a new replica's Open racing a starting process
// do. The Store must work on the file the path names once Open returns,
// never on the deleted one: a lease it acquires is seen by a Store opened
// afterwards.
func TestFileReplacedDuringOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	openPath(t, path) // the file exists before Open starts
	replaced := false
	defer sqlitelease.SetOpenHook(func() {
		if replaced {
			return
		}
		replaced = true
		removeDB(t, path)
		s, err := sqlitelease.Open(path)
		require.NoError(t, err)
		require.NoError(t, s.Close())
	})()
	s := openPath(t, path)
	require.True(t, replaced)
	l, err := s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)

	got, err := openPath(t, path).Get(bg(t), "job")
	require.NoError(t, err)
	assert.Equal(t, l, got, "the lease must be in the file at the path")
}

// TestFileKeptReplacedDuringOpen replaces the file every time Open sets it
// up: Open gives up with an error that says so, rather than work on a file
// that may not be the one at the path.
func TestFileKeptReplacedDuringOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	nested := false
	defer sqlitelease.SetOpenHook(func() {
		if nested {
			return
		}
		nested = true
		defer func() { nested = false }()
		removeDB(t, path)
		s, err := sqlitelease.Open(path)
		require.NoError(t, err)
		require.NoError(t, s.Close())
	})()
	_, err := sqlitelease.Open(path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "named another file")
}
