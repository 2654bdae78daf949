package sqlitelease_test

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// requireHeld asserts that a TryAcquire with the zero observed lease is
// refused, and returns the lease it reports.
func requireHeld(t *testing.T, s *sqlitelease.Store, name, holder string) elector.Lease {
	t.Helper()
	_, err := s.TryAcquire(bg(t), name, holder, 15*time.Second, elector.Lease{})
	var held *elector.HeldError
	require.ErrorAs(t, err, &held, "the lease must stay held")
	return held.Lease
}

// liveColumns reads the liveness record of a lease row: file, offset and
// the version it was written with (NULLs as zero values).
func liveColumns(t *testing.T, db *sql.DB, name string) (file string, offset, liveVersion, version int64) {
	t.Helper()
	var f sql.NullString
	var o, lv sql.NullInt64
	require.NoError(t, db.QueryRowContext(bg(t),
		`SELECT live_file, live_offset, live_version, version FROM leaderaware_lease WHERE name = ?`, name).Scan(&f, &o, &lv, &version))
	return f.String, o.Int64, lv.Int64, version
}

// TestLiveRecorded: every acquire and renew records the Store's liveness
// file and byte in the row, with the row's version.
func TestLiveRecorded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	s := openPath(t, path)
	file, offset := sqlitelease.LiveRecord(s)
	require.NotEmpty(t, file)
	require.Positive(t, offset)
	assert.Less(t, offset, int64(1)<<62)
	l, err := s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	f, o, lv, v := liveColumns(t, s.DB(), "job")
	assert.Equal(t, file, f)
	assert.Equal(t, offset, o)
	assert.Equal(t, v, lv)
	l, err = s.Renew(bg(t), l, time.Minute)
	require.NoError(t, err)
	_, _, lv, v = liveColumns(t, s.DB(), "job")
	assert.EqualValues(t, l.Version, v)
	assert.Equal(t, v, lv)

	other := openPath(t, path)
	otherFile, otherOffset := sqlitelease.LiveRecord(other)
	assert.Equal(t, file, otherFile, "one liveness file per database")
	assert.NotEqual(t, offset, otherOffset, "one byte per Store")
}

// TestLiveTakeoverAfterDeath: a candidate that finds the holder's liveness
// lock gone takes over at once, with no watch, every lease of that holder;
// the dead holder's renewal then fails.
func TestLiveTakeoverAfterDeath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	a, b := openPath(t, path), openPath(t, path)
	var leases []elector.Lease
	for _, name := range []string{"job-1", "job-2"} {
		l, err := a.TryAcquire(bg(t), name, "a", 15*time.Second, elector.Lease{})
		require.NoError(t, err)
		leases = append(leases, l)
		requireHeld(t, b, name, "b") // alive: held
	}

	require.NoError(t, sqlitelease.Die(a))
	for _, l := range leases {
		start := time.Now()
		next, err := b.TryAcquire(bg(t), l.Name, "b", 15*time.Second, elector.Lease{})
		require.NoError(t, err, "the holder is dead: take over at once")
		assert.Less(t, time.Since(start), deathBound)
		assert.Greater(t, next.Token, l.Token)
		assert.Equal(t, "b", next.Holder)
		_, err = a.Renew(bg(t), l, 15*time.Second)
		require.ErrorIs(t, err, elector.ErrLeaseLost)
	}
}

// TestLiveOwnLockIsNoProof: a Store's own byte is never locked to itself,
// so a lease held through the same Store (another holder name, another
// elector) is not taken over.
func TestLiveOwnLockIsNoProof(t *testing.T) {
	s := open(t)
	_, err := s.TryAcquire(bg(t), "job", "a", 15*time.Second, elector.Lease{})
	require.NoError(t, err)
	requireHeld(t, s, "job", "b")
}

// TestLiveCampaignWokenByDeath: a candidate that waits in Campaign, with a
// TTL of 15 s and a RetryInterval of 10 s, is woken by the holder's death
// and leads within milliseconds.
func TestLiveCampaignWokenByDeath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	a := openPath(t, path)
	b := &countingStore{S: openPath(t, path)}
	ea, err := elector.New(a, "job", elector.Config{TTL: 15 * time.Second, Holder: "a"})
	require.NoError(t, err)
	ta, err := ea.Campaign(bg(t))
	require.NoError(t, err)
	defer ta.Abandon()

	eb, err := elector.New(b, "job", elector.Config{TTL: 15 * time.Second, RetryInterval: 10 * time.Second, Holder: "b"})
	require.NoError(t, err)
	won := make(chan campaignResult, 1)
	go func() {
		term, err := eb.Campaign(bg(t))
		won <- campaignResult{term, err, time.Now()}
	}()
	require.Eventually(t, func() bool { return b.Acquires.Load() > 0 }, 5*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond) // it waits now

	start := time.Now()
	require.NoError(t, sqlitelease.Die(a))
	r := requireWon(t, won, 2*time.Second)
	took := r.at.Sub(start)
	t.Logf("the candidate led %v after the holder's death", took)
	assert.Less(t, took, deathBound)
	assert.Greater(t, r.term.Token(), ta.Token())
	assert.LessOrEqual(t, b.Acquires.Load(), int64(3), "woken by the death, not by polling")
	require.NoError(t, r.term.Resign(bg(t)))
}

// requireWon waits for a campaign to return a term.
func requireWon(t *testing.T, won <-chan campaignResult, within time.Duration) campaignResult {
	t.Helper()
	select {
	case r := <-won:
		require.NoError(t, r.err)
		return r
	case <-time.After(within):
		t.Fatalf("the candidate did not lead within %v", within)
		return campaignResult{}
	}
}

// TestLiveCloseClears: Close clears the liveness record of the leases its
// Store still holds (bumping their versions) before it drops its lock, so a
// candidate does not take them over at once (their jobs may still run) but
// waits the elapsed-time rule; released leases are left alone.
func TestLiveCloseClears(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	a, err := sqlitelease.Open(path)
	require.NoError(t, err)
	b := openPath(t, path)
	held, err := a.TryAcquire(bg(t), "held", "a", 15*time.Second, elector.Lease{})
	require.NoError(t, err)
	released, err := a.TryAcquire(bg(t), "released", "a", 15*time.Second, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, a.Release(bg(t), released))
	_, _, _, releasedVersion := liveColumns(t, b.DB(), "released")

	require.NoError(t, a.Close())
	_, err = a.Renew(bg(t), held, 15*time.Second)
	require.ErrorIs(t, err, sqlitelease.ErrClosed)

	f, o, lv, v := liveColumns(t, b.DB(), "held")
	assert.Empty(t, f)
	assert.Zero(t, o)
	assert.Zero(t, lv)
	assert.Greater(t, uint64(v), held.Version, "the clear is a write: it bumps the version")
	_, _, _, v = liveColumns(t, b.DB(), "released")
	assert.Equal(t, releasedVersion, v, "a released lease is not touched")

	cur := requireHeld(t, b, "held", "b")
	assert.Equal(t, held.Token, cur.Token)
	// The elapsed-time rule still applies: a candidate that watched this
	// version for the TTL takes it over.
	next, err := b.TryAcquire(bg(t), "held", "b", 15*time.Second, cur)
	require.NoError(t, err)
	assert.Greater(t, next.Token, held.Token)
}

// TestLiveCloseClearsBeforeUnlocking: Close holds its lock while it clears
// the records: while another connection keeps the file locked (the clear
// waits), the lock stays; it goes once the records are cleared.
func TestLiveCloseClearsBeforeUnlocking(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	a, err := sqlitelease.Open(path)
	require.NoError(t, err)
	b := openPath(t, path)
	_, err = a.TryAcquire(bg(t), "job", "a", 15*time.Second, elector.Lease{})
	require.NoError(t, err)

	committed := holdWriteLock(t, rawDB(t, path), 300*time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	time.Sleep(100 * time.Millisecond)
	locked, err := sqlitelease.Locked(b, a)
	require.NoError(t, err)
	assert.True(t, locked, "the lock must stay while the records are not cleared")
	require.NoError(t, <-committed)
	require.NoError(t, <-closed)
	locked, err = sqlitelease.Locked(b, a)
	require.NoError(t, err)
	assert.False(t, locked, "Close drops the lock")
	f, _, _, _ := liveColumns(t, b.DB(), "job")
	assert.Empty(t, f)
}

// TestLiveCloseKeepsLockIfItCannotClear: a Close that cannot clear the
// liveness records (another connection keeps the file locked) returns an
// error and keeps its lock until the process exits, so no candidate takes
// the lease over at once while its job may run.
func TestLiveCloseKeepsLockIfItCannotClear(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	a, err := sqlitelease.Open(path, sqlitelease.WithBusyTimeout(0))
	require.NoError(t, err)
	b := openPath(t, path)
	_, err = a.TryAcquire(bg(t), "job", "a", 15*time.Second, elector.Lease{})
	require.NoError(t, err)

	defer sqlitelease.SetCloseTimeout(100 * time.Millisecond)()
	committed := holdWriteLock(t, rawDB(t, path), 300*time.Millisecond)
	err = a.Close()
	require.Error(t, err)
	t.Log(err)
	assert.Contains(t, err.Error(), path+"-live")
	assert.Contains(t, err.Error(), "stays held until the process exits")
	require.NoError(t, <-committed)

	requireHeld(t, b, "job", "b")
	f, _, _, _ := liveColumns(t, b.DB(), "job")
	assert.NotEmpty(t, f, "the record was not cleared")
}

// TestLiveFile: the liveness file is created with mode 0600 next to the
// database (next to the file a symbolic link points to, as SQLite's -wal),
// and holds nothing but the high-water mark of tokens: 8 bytes.
func TestLiveFile(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real.db")
	link := filepath.Join(dir, "link.db")
	s := openPath(t, target)
	l, err := s.TryAcquire(bg(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	_, err = s.Renew(bg(t), l, time.Minute)
	require.NoError(t, err)
	fi, err := os.Stat(target + "-live")
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	assert.Equal(t, l.Token, liveMark(t, target))

	require.NoError(t, os.Symlink(target, link))
	viaLink := openPath(t, link)
	_, err = os.Stat(link + "-live")
	require.ErrorIs(t, err, os.ErrNotExist, "the liveness file sits next to the real file")
	file, _ := sqlitelease.LiveRecord(s)
	linkFile, _ := sqlitelease.LiveRecord(viaLink)
	assert.Equal(t, file, linkFile)
	require.NoError(t, sqlitelease.Die(s))
	_, err = viaLink.TryAcquire(bg(t), "job", "b", time.Minute, elector.Lease{})
	require.NoError(t, err, "a Store opened through the link tests the same file")
}

// TestLiveFileRefused: Open refuses a liveness file that is not one, with an
// error naming it.
func TestLiveFileRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		make  func(t *testing.T, live string)
		cause string
	}{
		{"directory", func(t *testing.T, live string) { require.NoError(t, os.Mkdir(live, 0o700)) }, "is a directory"},
		{"symbolic link", func(t *testing.T, live string) {
			require.NoError(t, os.Symlink(filepath.Join(t.TempDir(), "elsewhere"), live))
		}, "symbolic link"},
		{"not empty", func(t *testing.T, live string) {
			require.NoError(t, os.WriteFile(live, []byte("someone's data\n"), 0o600))
		}, "holds 15 bytes"},
		{"8 bytes, no mark", func(t *testing.T, live string) {
			require.NoError(t, os.WriteFile(live, bytes.Repeat([]byte{0xff}, 8), 0o600))
		}, "no token high-water mark"},
		{"fifo", func(t *testing.T, live string) { require.NoError(t, syscall.Mkfifo(live, 0o600)) }, "not a regular file"},
		{"unwritable", func(t *testing.T, live string) {
			if os.Geteuid() == 0 {
				t.Skip("root writes read-only files")
			}
			require.NoError(t, os.WriteFile(live, nil, 0o400))
		}, "not writable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "leases.db")
			tc.make(t, path+"-live")
			s, err := sqlitelease.Open(path)
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded")
			}
			t.Log(err)
			assert.Contains(t, err.Error(), path+"-live", "the error names the liveness file")
			assert.Contains(t, err.Error(), tc.cause)
		})
	}
}

// TestLiveReplacedFileIsNoProof: a liveness file deleted and created again
// while a holder runs is another file: a candidate that opens the new one
// finds no lock of the holder on it, and must not take that for a death.
func TestLiveReplacedFileIsNoProof(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	a := openPath(t, path)
	_, err := a.TryAcquire(bg(t), "job", "a", 15*time.Second, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, os.Remove(path+"-live"))
	b := openPath(t, path)
	fileA, _ := sqlitelease.LiveRecord(a)
	fileB, _ := sqlitelease.LiveRecord(b)
	require.NotEqual(t, fileA, fileB)
	requireHeld(t, b, "job", "b")
}

// v2AcquireSQL is the acquire statement of schema version 2, as a process
// of the previous release still runs it on a migrated file: it knows
// nothing of the liveness columns.
const v2AcquireSQL = `INSERT INTO leaderaware_lease (name, holder, token, version, ttl_ms, released, written_at)
VALUES (?1, ?2, 1, 1, ?3, 0, 0)
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, token = token + 1, version = version + 1,
	ttl_ms = excluded.ttl_ms, released = 0, written_at = excluded.written_at
WHERE released OR (token = ?4 AND version = ?5)`

// TestLiveStaleRecordOfOldWriter: a process of the previous release (schema
// 2 statements) that takes a lease over leaves the liveness columns of the
// former holder in the row. They must not count: when that former holder
// dies, the lease, now held by the old process, is not taken over.
func TestLiveStaleRecordOfOldWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	a, b := openPath(t, path), openPath(t, path)
	l, err := a.TryAcquire(bg(t), "job", "a", 15*time.Second, elector.Lease{})
	require.NoError(t, err)
	res, err := rawDB(t, path).ExecContext(bg(t), v2AcquireSQL, "job", "old-release", 15000, int64(l.Token), int64(l.Version))
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the old process took the lease over")

	require.NoError(t, sqlitelease.Die(a))
	cur := requireHeld(t, b, "job", "b")
	assert.Equal(t, "old-release", cur.Holder)
}

// TestMigrateFromVersion2: a file of schema version 2 gets the liveness
// columns, NULL in its rows: a held lease stays held (the elapsed-time rule
// alone), and the next term records its holder's liveness.
func TestMigrateFromVersion2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v2.db")
	db := rawDB(t, path)
	for _, stmt := range []string{
		`CREATE TABLE leaderaware_meta (key TEXT NOT NULL PRIMARY KEY, value ANY) STRICT, WITHOUT ROWID`,
		`INSERT INTO leaderaware_meta VALUES ('schema_version', 2), ('token_high_water', 5)`,
		`CREATE TABLE leaderaware_lease (
			name       TEXT    NOT NULL PRIMARY KEY,
			holder     TEXT    NOT NULL,
			token      INTEGER NOT NULL CHECK (token > 0),
			version    INTEGER NOT NULL CHECK (version > 0),
			ttl_ms     INTEGER NOT NULL CHECK (ttl_ms > 0),
			released   INTEGER NOT NULL CHECK (released IN (0, 1)),
			written_at INTEGER NOT NULL
		) STRICT, WITHOUT ROWID`,
		`INSERT INTO leaderaware_lease VALUES ('job', 'v2-holder', 5, 3, 15000, 0, 0)`,
	} {
		_, err := db.ExecContext(bg(t), stmt)
		require.NoError(t, err)
	}
	s := openPath(t, path)
	cur := requireHeld(t, s, "job", "b")
	assert.Equal(t, "v2-holder", cur.Holder)
	assert.EqualValues(t, 3, cur.Version)
	next, err := s.TryAcquire(bg(t), "job", "b", 15*time.Second, cur)
	require.NoError(t, err)
	file, offset := sqlitelease.LiveRecord(s)
	f, o, lv, v := liveColumns(t, s.DB(), "job")
	assert.Equal(t, file, f)
	assert.Equal(t, offset, o)
	assert.Equal(t, v, lv)
	assert.EqualValues(t, next.Version, v)
	var version int
	require.NoError(t, s.DB().QueryRowContext(bg(t), `SELECT value FROM leaderaware_meta WHERE key = 'schema_version'`).Scan(&version))
	assert.Equal(t, sqlitelease.SchemaVersion, version)
}
