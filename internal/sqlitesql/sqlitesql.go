// Package sqlitesql holds the statements sqlitelease runs; internal so that
// bench measures the very same text.
package sqlitesql

// The store's tables and the key of its token high-water mark. Their names
// carry a prefix because jobs keep their own tables in the same file.
const (
	MetaTable  = "leaderaware_meta"
	LeaseTable = "leaderaware_lease"
	// HighWaterKey is the key in MetaTable of the largest token ever
	// issued in the file, kept by triggers on LeaseTable.
	HighWaterKey = "token_high_water"
	// ReleasesKey is the key in MetaTable of the count of terms that
	// ended by a release or the deletion of their row, kept by triggers
	// on LeaseTable.
	ReleasesKey = "released_terms"
)

// The lease statements. Each is one statement; none compares times:
// written_at is for display. Every write floors the new version at the
// wall clock it is given, in microseconds (to the millisecond), as tokens
// are floored: versions never repeat, even after the row was rolled back.
const (
	// Acquire starts a new term (?1 name, ?2 holder, ?3 TTL in ms) if the
	// lease is new, released, or still the observed term (?4 token, ?5
	// version), and returns its token and version; otherwise it returns no
	// row. The token exceeds the row's last one and every token the file
	// ever issued (the high-water mark, which survives deleted rows), and
	// is at least ?6 (the caller's floor). ?7 is the wall clock in ms. ?8
	// and ?9 are the liveness file and byte of the new holder (NULL if it
	// has none).
	Acquire = `INSERT INTO ` + LeaseTable + ` (name, holder, token, version, ttl_ms, released, written_at,
	live_file, live_offset, live_version)
VALUES (?1, ?2, max(?6, coalesce((SELECT value FROM ` + MetaTable + ` WHERE key = '` + HighWaterKey + `'), 0) + 1), max(1, ?7 * 1000), ?3, 0, ?7,
	?8, ?9, max(1, ?7 * 1000))
ON CONFLICT (name) DO UPDATE SET
	holder = excluded.holder,
	token = max(token + 1, excluded.token),
	version = max(version + 1, ?7 * 1000),
	ttl_ms = excluded.ttl_ms,
	released = 0,
	written_at = excluded.written_at,
	live_file = excluded.live_file,
	live_offset = excluded.live_offset,
	live_version = max(version + 1, ?7 * 1000)
WHERE released OR (token = ?4 AND version = ?5)
RETURNING token, version`

	// Get reads the current, unreleased term of the lease ?1: holder,
	// token, version, TTL in ms and written_at. It returns no row for a
	// free lease.
	Get = `SELECT holder, token, version, ttl_ms, written_at FROM ` + LeaseTable + `
WHERE name = ?1 AND NOT released`

	// GetLive is Get followed by the holder's liveness file and byte if the
	// row's version is the one they were recorded with (NULL otherwise:
	// unknown).
	GetLive = `SELECT holder, token, version, ttl_ms, written_at,
	CASE WHEN live_version = version THEN live_file END,
	CASE WHEN live_version = version THEN live_offset END
FROM ` + LeaseTable + `
WHERE name = ?1 AND NOT released`

	// Renew records a new TTL (?4 ms) for the term ?1 ?2 ?3 (name, holder,
	// token) if it is still current and unreleased, bumps the version and
	// returns it. ?5 is the wall clock in ms; ?6 and ?7 the holder's
	// liveness file and byte.
	Renew = `UPDATE ` + LeaseTable + ` SET version = max(version + 1, ?5 * 1000), ttl_ms = ?4, written_at = ?5,
	live_file = ?6, live_offset = ?7, live_version = max(version + 1, ?5 * 1000)
WHERE name = ?1 AND holder = ?2 AND token = ?3 AND NOT released
RETURNING version`

	// RenewBatch is Renew for many terms in one statement: ?1 is a JSON
	// array of objects {"n": name, "h": holder, "t": token, "ttl": TTL in
	// ms}, one per term; ?2 is the wall clock in ms, ?3 and ?4 the liveness
	// file and byte. It returns the name, holder, token and new version of
	// each term it renewed.
	RenewBatch = `UPDATE ` + LeaseTable + ` SET version = max(version + 1, ?2 * 1000), ttl_ms = json_extract(j.value, '$.ttl'), written_at = ?2,
	live_file = ?3, live_offset = ?4, live_version = max(version + 1, ?2 * 1000)
FROM json_each(?1) AS j
WHERE name = json_extract(j.value, '$.n') AND holder = json_extract(j.value, '$.h')
	AND token = json_extract(j.value, '$.t') AND NOT released
RETURNING name, holder, token, version`

	// Release marks the term ?1 ?2 ?3 released if it is still current, and
	// bumps the version; ?4 is the wall clock in ms. It never touches the
	// token.
	Release = `UPDATE ` + LeaseTable + ` SET released = 1, version = max(version + 1, ?4 * 1000), written_at = ?4
WHERE name = ?1 AND holder = ?2 AND token = ?3 AND NOT released`
)
