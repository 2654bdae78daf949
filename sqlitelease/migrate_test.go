package sqlitelease_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/stepclock"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// TestMigrateFromVersion1 opens a file written by version 1 of the schema,
// which kept an expiry time per lease. A lease that had expired (or was
// released) becomes released; a live one stays held, with the time it had
// left as its TTL (at most MaxTTL), so a candidate waits that long before it
// takes it over. Tokens carry on above the old ones.
func TestMigrateFromVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	db := rawDB(t, path)
	now := time.Now().UnixMilli()
	for _, stmt := range []string{
		`CREATE TABLE leaderaware_meta (key TEXT NOT NULL PRIMARY KEY, value ANY) STRICT, WITHOUT ROWID`,
		`INSERT INTO leaderaware_meta VALUES ('schema_version', 1)`,
		`CREATE TABLE leaderaware_lease (
			name       TEXT    NOT NULL PRIMARY KEY,
			holder     TEXT    NOT NULL,
			token      INTEGER NOT NULL CHECK (token > 0),
			expires_at INTEGER NOT NULL,
			acquired_at INTEGER NOT NULL
		) STRICT, WITHOUT ROWID`,
	} {
		_, err := db.ExecContext(bg(t), stmt)
		require.NoError(t, err)
	}
	for _, row := range []struct {
		name, holder     string
		token, expiresAt int64
	}{
		{"live", "h1", 7, now + 60_000},
		{"expired", "h2", 9, now - 5_000},
		{"far", "h3", 3, 1<<63 - 1}, // v1 capped expiries instead of overflowing
	} {
		_, err := db.ExecContext(bg(t), `INSERT INTO leaderaware_lease VALUES (?, ?, ?, ?, ?)`,
			row.name, row.holder, row.token, row.expiresAt, now-20_000)
		require.NoError(t, err)
	}

	c := stepclock.New()
	s := openPath(t, path, sqlitelease.WithClock(c))
	live, err := s.Get(bg(t), "live")
	require.NoError(t, err)
	assert.Equal(t, "h1", live.Holder)
	assert.EqualValues(t, 7, live.Token)
	assert.LessOrEqual(t, live.TTL, time.Minute)
	assert.Greater(t, live.TTL, 50*time.Second, "the time the v1 lease had left")
	far, err := s.Get(bg(t), "far")
	require.NoError(t, err)
	assert.Equal(t, elector.MaxTTL, far.TTL)
	_, err = s.Get(bg(t), "expired")
	require.ErrorIs(t, err, elector.ErrNoLease, "an expired v1 lease is free")

	rows, err := s.List(bg(t))
	require.NoError(t, err)
	require.Len(t, rows, 3)
	assert.Equal(t, "expired", rows[0].Name)
	assert.True(t, rows[0].Released)
	assert.Equal(t, "h2", rows[0].Holder)

	_, err = s.TryAcquire(bg(t), "live", "b", time.Minute, elector.Lease{})
	require.ErrorIs(t, err, elector.ErrHeld, "a live v1 lease is held")
	// With the wall clock back at 1970, only the high-water mark that the
	// migration set keeps new tokens above the old ones.
	back := time.Since(time.Unix(0, 0))
	c.Step(-back)
	next, err := s.TryAcquire(bg(t), "live", "b", time.Minute, live)
	require.NoError(t, err)
	assert.Greater(t, next.Token, uint64(9), "tokens carry on above the file's largest")
	free, err := s.TryAcquire(bg(t), "expired", "b", time.Minute, elector.Lease{})
	require.NoError(t, err)
	assert.Greater(t, free.Token, next.Token)
}

// TestMigrateFromVersion3: a file of schema version 3 gets the count of
// released terms, starting at 0, and its triggers. Its rows keep their
// terms, and a release of a lease held before the migration reaches the
// watchers of another Store within a few watch intervals, counted once.
func TestMigrateFromVersion3(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v3.db")
	db := rawDB(t, path)
	for _, stmt := range []string{
		`CREATE TABLE leaderaware_meta (key TEXT NOT NULL PRIMARY KEY, value ANY) STRICT, WITHOUT ROWID`,
		`INSERT INTO leaderaware_meta VALUES ('schema_version', 3), ('token_high_water', 5)`,
		`CREATE TABLE leaderaware_lease (
			name       TEXT    NOT NULL PRIMARY KEY,
			holder     TEXT    NOT NULL,
			token      INTEGER NOT NULL CHECK (token > 0),
			version    INTEGER NOT NULL CHECK (version > 0),
			ttl_ms     INTEGER NOT NULL CHECK (ttl_ms > 0),
			released   INTEGER NOT NULL CHECK (released IN (0, 1)),
			written_at INTEGER NOT NULL,
			live_file TEXT,
			live_offset INTEGER CHECK (live_offset > 0),
			live_version INTEGER
		) STRICT, WITHOUT ROWID`,
		`CREATE TRIGGER leaderaware_lease_token_insert AFTER INSERT ON leaderaware_lease BEGIN
			INSERT INTO leaderaware_meta (key, value) VALUES ('token_high_water', NEW.token)
			ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value);
		END`,
		`CREATE TRIGGER leaderaware_lease_token_update AFTER UPDATE OF token ON leaderaware_lease BEGIN
			INSERT INTO leaderaware_meta (key, value) VALUES ('token_high_water', NEW.token)
			ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value);
		END`,
		`INSERT INTO leaderaware_lease VALUES ('held', 'v3-holder', 5, 3, 60000, 0, 0, NULL, NULL, NULL),
			('free', 'v3-holder', 4, 2, 60000, 1, 0, NULL, NULL, NULL)`,
	} {
		_, err := db.ExecContext(bg(t), stmt)
		require.NoError(t, err)
	}

	s := openPath(t, path)
	meta := func(key string) int64 {
		t.Helper()
		var v int64
		require.NoError(t, s.DB().QueryRowContext(bg(t), `SELECT value FROM leaderaware_meta WHERE key = ?`, key).Scan(&v))
		return v
	}
	assert.EqualValues(t, sqlitelease.SchemaVersion, meta("schema_version"))
	assert.Zero(t, meta("released_terms"), "the count starts at 0, whatever the rows")

	w := openPath(t, path)
	ch := notifications(t, w)
	old := elector.Lease{Name: "held", Holder: "v3-holder", Token: 5, Version: 3, TTL: time.Minute, Written: time.UnixMilli(0)}
	got, err := w.GetMany(bg(t), []string{"held", "free"})
	require.NoError(t, err)
	assert.Equal(t, []elector.Lease{old, {Name: "free"}}, got)
	_, err = s.TryAcquire(bg(t), "held", "b", time.Minute, elector.Lease{})
	require.ErrorIs(t, err, elector.ErrHeld, "a lease held before the migration stays held")

	drain(ch)
	require.NoError(t, s.Release(bg(t), old))
	t.Logf("the release reached the other store after %v", requirePush(t, ch, "held", wakeBound))
	assert.EqualValues(t, 1, meta("released_terms"))
	next, err := s.TryAcquire(bg(t), "free", "b", time.Minute, elector.Lease{})
	require.NoError(t, err)
	assert.Greater(t, next.Token, uint64(5), "tokens carry on above the file's largest")
	requirePush(t, ch, "free", wakeBound)
	got, err = w.GetMany(bg(t), []string{"held", "free"})
	require.NoError(t, err)
	assert.Equal(t, []elector.Lease{{Name: "held"}, next}, got)
}
