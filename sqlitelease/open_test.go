package sqlitelease_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/logbuf"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

func bg(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// rawDB opens path with a second *sql.DB, standing in for another process.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	return db
}

func TestOpenCreatesPrivateFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	s := openPath(t, path)
	_, err := s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{}) // writes, so -wal and -shm exist
	require.NoError(t, err)
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "mode of %s", filepath.Base(p))
	}
}

func TestOpenUsesWAL(t *testing.T) {
	s := open(t)
	var mode, sync string
	require.NoError(t, s.DB().QueryRowContext(bg(t), "PRAGMA journal_mode").Scan(&mode))
	require.NoError(t, s.DB().QueryRowContext(bg(t), "PRAGMA synchronous").Scan(&sync))
	assert.Equal(t, "wal", mode)
	assert.Equal(t, "1", sync, "synchronous=NORMAL")
}

func TestReopenKeepsLeases(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	s, err := sqlitelease.Open(path)
	require.NoError(t, err)
	l, err := s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")

	// Two stores on the file at once, both after the schema exists.
	s1, s2 := openPath(t, path), openPath(t, path)
	for _, s := range []*sqlitelease.Store{s1, s2} {
		got, err := s.Get(bg(t), "job")
		require.NoError(t, err)
		assert.Equal(t, l.Token, got.Token)
		assert.Equal(t, "a", got.Holder)
	}
	require.NoError(t, s1.Release(bg(t), l))
	next, err := s2.TryAcquire(bg(t), "job", "b", time.Minute, elector.Lease{})
	require.NoError(t, err)
	assert.Greater(t, next.Token, l.Token, "tokens survive reopening")
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	s, err := sqlitelease.Open(path)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = rawDB(t, path).ExecContext(bg(t), `UPDATE leaderaware_meta SET value = ? WHERE key = 'schema_version'`, sqlitelease.SchemaVersion+1)
	require.NoError(t, err)

	_, err = sqlitelease.Open(path)
	require.ErrorIs(t, err, sqlitelease.ErrSchemaTooNew)
	t.Log(err)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), fmt.Sprintf("version %d", sqlitelease.SchemaVersion+1))
}

func TestClosedStore(t *testing.T) {
	s, err := sqlitelease.Open(filepath.Join(t.TempDir(), "leases.db"))
	require.NoError(t, err)
	l, err := s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = s.TryAcquire(bg(t), "job", "b", time.Minute, elector.Lease{})
	assert.ErrorIs(t, err, sqlitelease.ErrClosed)
	_, err = s.Renew(bg(t), l, time.Minute)
	assert.ErrorIs(t, err, sqlitelease.ErrClosed)
	assert.ErrorIs(t, s.Release(bg(t), l), sqlitelease.ErrClosed)
	_, err = s.Get(bg(t), "job")
	assert.ErrorIs(t, err, sqlitelease.ErrClosed)
	err = s.FencedLease(bg(t), l, func(context.Context, *sql.Tx) error { return nil })
	assert.ErrorIs(t, err, sqlitelease.ErrClosed)
	_, err = s.GetMany(bg(t), []string{"job"})
	assert.ErrorIs(t, err, sqlitelease.ErrClosed)
	_, err = s.RenewMany(bg(t), []elector.Lease{l})
	assert.ErrorIs(t, err, sqlitelease.ErrClosed)
}

func TestOpenBadOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	_, err := sqlitelease.Open(path, sqlitelease.WithBusyTimeout(-time.Second))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-1s")
	_, err = sqlitelease.Open(path, sqlitelease.WithWatchInterval(0))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "0s")
}

// TestOpenBadPaths checks that each refused path gets an error naming the
// path and the cause.
func TestOpenBadPaths(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o600))
		return p
	}
	garbage := write("garbage.db", []byte(strings.Repeat("this is not a database; ", 100)))
	notDir := write("plain-file", []byte("x"))
	corrupt := corruptDB(t, filepath.Join(dir, "corrupt.db"))

	tests := []struct {
		name, path, cause string
	}{
		{"missing directory", filepath.Join(dir, "no", "such", "dir", "leases.db"), "does not exist"},
		{"parent is a file", filepath.Join(notDir, "leases.db"), "not a directory"},
		{"path is a directory", dir, "is a directory"},
		{"not SQLite", garbage, "not an SQLite database"},
		{"corrupt", corrupt, "corrupt"},
		{"question mark", filepath.Join(dir, "what?.db"), "'?'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := sqlitelease.Open(tt.path)
			if err == nil {
				_ = s.Close()
				t.Fatalf("Open(%q) succeeded", tt.path)
			}
			t.Log(err)
			assert.Contains(t, err.Error(), tt.path, "the error must name the path")
			assert.Contains(t, err.Error(), tt.cause, "the error must say why")
		})
	}
	t.Run("empty path", func(t *testing.T) {
		_, err := sqlitelease.Open("")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "empty")
	})
}

// TestOpenUnwritable checks files and directories the process may not write.
func TestOpenUnwritable(t *testing.T) {
	t.Run("read-only filesystem", func(t *testing.T) {
		// sysfs refuses new files even to root.
		if runtime.GOOS != "linux" {
			t.Skip("needs /sys")
		}
		path := "/sys/leaderaware-sqlitelease-test.db"
		s, err := sqlitelease.Open(path)
		if err == nil {
			_ = s.Close()
			t.Skip("/sys is writable here")
		}
		t.Log(err)
		assert.Contains(t, err.Error(), path)
		assert.Contains(t, err.Error(), "not writable")
	})
	if os.Geteuid() == 0 {
		t.Skip("root writes read-only files and directories")
	}
	t.Run("directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "ro")
		require.NoError(t, os.Mkdir(dir, 0o500))
		path := filepath.Join(dir, "leases.db")
		_, err := sqlitelease.Open(path)
		require.Error(t, err)
		t.Log(err)
		assert.Contains(t, err.Error(), path)
		assert.Contains(t, err.Error(), "not writable")
	})
	t.Run("directory of an existing file", func(t *testing.T) {
		// The file is writable, but SQLite cannot create its -wal and -shm
		// files next to it.
		dir := filepath.Join(t.TempDir(), "ro")
		require.NoError(t, os.Mkdir(dir, 0o700))
		path := filepath.Join(dir, "leases.db")
		s, err := sqlitelease.Open(path)
		require.NoError(t, err)
		require.NoError(t, s.Close())
		for _, suffix := range []string{"-wal", "-shm"} {
			_ = os.Remove(path + suffix)
		}
		require.NoError(t, os.Chmod(dir, 0o500))
		t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
		_, err = sqlitelease.Open(path)
		require.Error(t, err)
		t.Log(err)
		assert.Contains(t, err.Error(), path)
		assert.Contains(t, err.Error(), "not writable")
	})
	t.Run("file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "leases.db")
		s, err := sqlitelease.Open(path)
		require.NoError(t, err)
		require.NoError(t, s.Close())
		require.NoError(t, os.Chmod(path, 0o400))
		_, err = sqlitelease.Open(path)
		require.Error(t, err)
		t.Log(err)
		assert.Contains(t, err.Error(), path)
		assert.Contains(t, err.Error(), "not writable")
	})
}

// corruptDB writes an SQLite database at path whose pages after the header
// are overwritten with garbage, and returns path.
func corruptDB(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE t (a TEXT PRIMARY KEY, b INTEGER); INSERT INTO t VALUES ('x', 1)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	for i := 100; i < len(data); i++ {
		data[i] = 0xAB
	}
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

// TestBadInputNamesValue checks the store's own validation messages.
func TestBadInputNamesValue(t *testing.T) {
	s := open(t)
	_, err := s.TryAcquire(bg(t), "job", "bad\tholder", time.Minute, elector.Lease{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `bad\tholder`)
	assert.False(t, errors.Is(err, elector.ErrHeld))
}

// TestBusyTimeoutSaturates checks the busy_timeout each connection gets:
// SQLite takes a value above 2^31-1 ms as 0 (report busy at once), so a
// longer timeout must become the longest SQLite can wait, and a fraction of
// a millisecond must not become 0.
func TestBusyTimeoutSaturates(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{
		{1000 * time.Hour, math.MaxInt32},
		{500 * time.Microsecond, 1},
		{0, 0},
	} {
		s := open(t, sqlitelease.WithBusyTimeout(tc.d))
		var got int64
		require.NoError(t, s.DB().QueryRowContext(bg(t), "PRAGMA busy_timeout").Scan(&got))
		assert.Equal(t, tc.want, got, "busy_timeout for WithBusyTimeout(%v)", tc.d)
	}
}

// TestOpenLogsPath: Open logs the absolute path of the file it uses at
// Info, so that a relative path or a working directory is no mystery.
func TestOpenLogsPath(t *testing.T) {
	buf := logbuf.CaptureDefault(t)
	dir := t.TempDir()
	t.Chdir(dir)

	openPath(t, "leases.db")
	recs := buf.Records(t)
	require.Len(t, recs, 1, "one record: %s", buf.String())
	assert.Equal(t, "INFO", recs[0]["level"])
	wd, err := filepath.EvalSymlinks(dir) // the working directory as the kernel has it
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(wd, "leases.db"), recs[0]["path"])
}

// TestOpenLogsToWithLogger: with WithLogger, Open's line goes to that
// logger and none to slog.Default; WithLogger(nil) keeps slog.Default.
func TestOpenLogsToWithLogger(t *testing.T) {
	def := logbuf.CaptureDefault(t)
	l, buf := logbuf.JSONLogger()
	path := filepath.Join(t.TempDir(), "leases.db")

	openPath(t, path, sqlitelease.WithLogger(l))
	recs := buf.Records(t)
	require.Len(t, recs, 1, "one record: %s", buf.String())
	assert.Equal(t, "sqlitelease: opened the lease store", recs[0]["msg"])
	assert.Equal(t, path, recs[0]["path"])
	assert.Empty(t, def.String(), "nothing goes to slog.Default")

	openPath(t, path, sqlitelease.WithLogger(l), sqlitelease.WithLogger(nil))
	assert.Len(t, def.Records(t), 1, "WithLogger(nil) logs to slog.Default")
	assert.Len(t, buf.Records(t), 1)
}
