package sqlitelease_test

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/logbuf"
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

// backup copies the database at path, as it is now, to a new file of the
// same directory and returns its path.
func backup(t *testing.T, s *sqlitelease.Store, path string) string {
	t.Helper()
	to := path + ".backup"
	_ = os.Remove(to)
	_, err := s.DB().ExecContext(bg(t), `VACUUM INTO ?`, to)
	require.NoError(t, err)
	return to
}

// restore moves a copy of the backup over the database at path, the way
// restores are done (`mv restored.db app.db`), and removes the -wal and
// -shm files of the file it replaced.
func restore(t *testing.T, backup, path string) {
	t.Helper()
	b, err := os.ReadFile(backup)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path+".restored", b, 0o600))
	require.NoError(t, os.Rename(path+".restored", path))
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(path + suffix); !errors.Is(err, fs.ErrNotExist) {
			require.NoError(t, err)
		}
	}
}

// TestFileRestoredWhileRunning moves a backup, taken before the lease was
// acquired, over the file while its holder and a candidate run. The holder's
// term must end, and the Stores must go on with the restored file: the
// candidate must not take the lease at once (the holder's job may still
// run), but by the elapsed-time rule, with a token above every token issued
// before.
func TestFileRestoredWhileRunning(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	holder, err := sqlitelease.Open(path)
	require.NoError(t, err)
	defer holder.Close() // a second Close returns the first one's result
	candidate := openPath(t, path)
	saved := backup(t, holder, path)
	l, err := holder.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	inUse, err := holder.DB().Conn(bg(t)) // a job's, in use across the restore
	require.NoError(t, err)

	restore(t, saved, path)

	_, err = holder.Renew(bg(t), l, time.Minute)
	require.ErrorIs(t, err, elector.ErrLeaseLost, "a term on the replaced file must end")
	require.ErrorIs(t, err, sqlitelease.ErrFileChanged)
	require.NoError(t, inUse.Close()) // back to its pool

	// A read within readRecheck of the candidate's last check of the file
	// may still be served by the old file; a health check follows the path.
	require.NoError(t, candidate.Healthy(nil))
	held := requireHeld(t, candidate, "job", "b")
	next, err := candidate.TryAcquire(bg(t), "job", "b", time.Minute, held)
	require.NoError(t, err, "once watched for its TTL, the lease is taken over")
	require.Greater(t, next.Token, l.Token, "tokens never go back")

	got, err := openPath(t, path).Get(bg(t), "job")
	require.NoError(t, err)
	require.Equal(t, next, got, "the term is in the file at the path")
	got, err = holder.Get(bg(t), "job")
	require.NoError(t, err, "the holder's Store works on the restored file")
	require.Equal(t, next, got)
	// A connection to the old file went back to the pool after the Store
	// left that file: a fenced write of a term on the new file must not
	// land on it.
	_, err = holder.TryAcquire(bg(t), "other", "a", time.Minute, requireHeld(t, holder, "other", "a"))
	require.NoError(t, err)
	other, err := holder.Get(bg(t), "other")
	require.NoError(t, err)
	require.NoError(t, holder.FencedLease(bg(t), other, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE job_data (x)`)
		return err
	}), "the fenced write goes to the new file")
	_, err = holder.Renew(bg(t), l, time.Minute)
	require.ErrorIs(t, err, elector.ErrLeaseLost, "the old term stays ended")

	// Closing the last connections to the old file must leave the new
	// file's write-ahead log alone: SQLite deletes the -wal at the path.
	require.NoError(t, holder.Close())
	_, err = os.Stat(path + "-wal")
	require.NoError(t, err, "the new file's log is still there")
	got, err = openPath(t, path).Get(bg(t), "job")
	require.NoError(t, err)
	require.Equal(t, next, got)
}

// TestFileRestoredFreshStore opens a new Store on a restored file while the
// Store of a holder on the replaced file still runs and has not looked at
// the file since. The new Store must not take the lease at once.
func TestFileRestoredFreshStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	holder := openPath(t, path)
	saved := backup(t, holder, path)
	for _, name := range []string{"known", "new"} {
		if name == "known" {
			l, err := holder.TryAcquire(bg(t), name, "a", time.Minute, elector.Lease{})
			require.NoError(t, err)
			require.NoError(t, holder.Release(bg(t), l))
			saved = backup(t, holder, path) // the lease is free in the backup
		}
		_, err := holder.TryAcquire(bg(t), name, "a", time.Minute, elector.Lease{})
		require.NoError(t, err)
	}

	restore(t, saved, path)

	fresh := openPath(t, path)
	requireHeld(t, fresh, "known", "b")
	requireHeld(t, fresh, "new", "b") // absent from the backup
}

// TestFileRestoredWhileStopped restores a file while no process has it open:
// nothing can run a term of the replaced file, so a new Store takes a free
// lease at once, with a token above every token issued before.
func TestFileRestoredWhileStopped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	s, err := sqlitelease.Open(path)
	require.NoError(t, err)
	saved := backup(t, s, path)
	l, err := s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, s.Release(bg(t), l))
	require.NoError(t, s.Close())

	restore(t, saved, path)

	next, err := openPath(t, path).TryAcquire(bg(t), "job", "b", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.Greater(t, next.Token, l.Token)
}

// TestFileDeletedFreshStoreWaits deletes the file under a holder and opens a
// new Store on the path, which creates a new file. The old holder's Store
// still runs, so its job may too: the new Store must not take the lease at
// once.
func TestFileDeletedFreshStoreWaits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	holder := openPath(t, path)
	_, err := holder.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)

	removeDB(t, path)

	requireHeld(t, openPath(t, path), "job", "b")
}

// TestFileReplacedWithItsLog moves another file over the database but leaves
// the replaced file's -wal and -shm next to it, which SQLite would read
// into the new file. The Store must not open it, and must say so in its
// health check until they are gone; then it goes on with the new file.
// A deleted file is unhealthy too.
func TestFileReplacedWithItsLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	s := openPath(t, path)
	saved := backup(t, s, path)
	l, err := s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, s.Healthy(nil))

	b, err := os.ReadFile(saved)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path+".restored", b, 0o600))
	require.NoError(t, os.Rename(path+".restored", path))

	_, err = s.Renew(bg(t), l, time.Minute)
	require.ErrorIs(t, err, elector.ErrLeaseLost)
	err = s.Healthy(nil)
	t.Log(err)
	require.ErrorIs(t, err, sqlitelease.ErrFileChanged)
	require.ErrorContains(t, err, path+"-wal")
	_, err = s.Get(bg(t), "job")
	require.ErrorIs(t, err, sqlitelease.ErrFileChanged)

	for _, suffix := range []string{"-wal", "-shm"} {
		require.NoError(t, os.Remove(path+suffix))
	}
	require.NoError(t, s.Healthy(nil), "the Store opened the new file")
	requireHeld(t, s, "job", "b")

	removeDB(t, path)
	require.ErrorIs(t, s.Healthy(nil), sqlitelease.ErrFileChanged, "no file is at the path")
}

// TestFileRestoredAfterRecentCheck restores the file right after a check of
// it passed, which serves reads for a while: a candidate's call for a free
// lease reads first, then finds the file changed at its write. It must
// follow the path to the new file then, not fail the campaign.
func TestFileRestoredAfterRecentCheck(t *testing.T) {
	defer sqlitelease.SetReadRecheck(time.Hour)()
	path := filepath.Join(t.TempDir(), "app.db")
	holder := openPath(t, path)
	saved := backup(t, holder, path)
	_, err := holder.TryAcquire(bg(t), "other", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	s := openPath(t, path)
	_, err = s.Get(bg(t), "other")
	require.NoError(t, err)

	restore(t, saved, path)

	requireHeld(t, s, "job", "b") // a placeholder: "job" is absent from the backup
}

// TestFileReplacedLogsToWithLogger: the line that says the Store followed
// the path to a replaced file goes to the logger of WithLogger, not to
// slog.Default.
func TestFileReplacedLogsToWithLogger(t *testing.T) {
	def := logbuf.CaptureDefault(t)
	l, buf := logbuf.JSONLogger()
	path := filepath.Join(t.TempDir(), "app.db")
	s := openPath(t, path, sqlitelease.WithLogger(l))
	saved := backup(t, s, path)

	restore(t, saved, path)

	require.NoError(t, s.Healthy(nil)) // which follows the path
	var msgs []string
	for _, rec := range buf.Records(t) {
		msgs = append(msgs, rec["msg"].(string))
	}
	require.Equal(t, []string{"sqlitelease: opened the lease store",
		"sqlitelease: the database file was replaced; the store ended its terms on the old file and opened the new one"}, msgs)
	assert.Empty(t, def.String(), "nothing goes to slog.Default")
}

// TestFileRestoredDuringTerm restores a backup taken during the holder's
// term: the restored file still has the term's row. The term ended with
// the old file all the same: neither its renewal nor a fenced write of it
// may go through on the new file.
func TestFileRestoredDuringTerm(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	holder := openPath(t, path)
	l, err := holder.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	saved := backup(t, holder, path)

	restore(t, saved, path)

	require.NoError(t, holder.Healthy(nil)) // which follows the path
	err = holder.FencedLease(bg(t), l, func(ctx context.Context, tx *sql.Tx) error { return nil })
	require.ErrorIs(t, err, elector.ErrLeaseLost, "the term ended with the old file")
	_, err = holder.Renew(bg(t), l, time.Minute)
	require.ErrorIs(t, err, elector.ErrLeaseLost)
}

// TestFileRestoredLongerTerm restores a backup whose row of the lease has a
// shorter TTL than the term the holder runs on the replaced file. A
// candidate that follows the path must wait at least that term's TTL, for
// the holder's job may run that long: not the backup row's.
func TestFileRestoredLongerTerm(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	holder := openPath(t, path)
	candidate := openPath(t, path)
	l, err := holder.TryAcquire(bg(t), "job", "a", 50*time.Millisecond, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, holder.Release(bg(t), l))
	saved := backup(t, holder, path) // a row with a TTL of 50ms
	_, err = holder.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)

	restore(t, saved, path)

	require.NoError(t, candidate.Healthy(nil)) // which follows the path
	held := requireHeld(t, candidate, "job", "b")
	require.GreaterOrEqual(t, held.TTL, time.Minute, "a candidate must wait out the term on the replaced file")
}

// TestHealthyWhileBusy asks for the health of a Store whose file was
// deleted while its lease operations are busy with another call (say, a
// campaign waiting for the lock of a restored file). The health check cannot
// follow the path in time, and must not report healthy.
func TestHealthyWhileBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	s := openPath(t, path)
	removeDB(t, path)
	release := sqlitelease.Occupy(s)
	defer release()

	ctx, cancel := context.WithTimeout(bg(t), 100*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/healthz", nil)
	require.NoError(t, err)
	require.ErrorIs(t, s.Healthy(req), sqlitelease.ErrFileChanged)
}

// TestHealthyWithSecondPath links the database file into another directory
// under a running Store, which then refuses every write: its health check
// must say so.
func TestHealthyWithSecondPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	s := openPath(t, path)
	require.NoError(t, os.Link(path, filepath.Join(t.TempDir(), "app.db")))

	_, err := s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.ErrorIs(t, err, sqlitelease.ErrSecondPath)
	require.ErrorIs(t, s.Healthy(nil), sqlitelease.ErrSecondPath)
}
