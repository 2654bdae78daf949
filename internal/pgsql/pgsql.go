// Package pgsql holds the statements pglease runs; it is internal so that
// bench measures the very same text.
package pgsql

import "strings"

// Statements are the lease statements on one lease table. Every statement
// but GetMany, RenewMany and List takes the lease name as $1.
type Statements struct {
	// Get reads the unreleased lease of $1: holder, token, version, ttl_us
	// and written_at. No row means the lease is free (never taken, or
	// released). TryAcquire without an observed lease runs it first and
	// answers a held lease from it, without a write.
	Get string

	// Acquire is TryAcquire's compare-and-set for holder $2 with TTL $3
	// microseconds, given the observed token $4 and version $5 (0 and 0 for
	// none). It reads the row in the statement's snapshot; if that shows a
	// lease held and not observed, that row is the answer: no insert is
	// tried, so no row lock is taken or waited for. Otherwise the upsert is
	// the compare-and-set, checked again on the latest row. It returns won
	// (true: the new term; false: the lease found held) and then holder,
	// token, version, ttl_us and written_at, or no row if the compare-and-set
	// found the row changed since the snapshot. The new token is larger than
	// the last one, than the server's clock in microseconds and than the
	// token mark (see [TokenTable]), which it raises; the new version is
	// larger than the last one and than the clock, as in every write.
	Acquire string

	// Renew records TTL $4 microseconds and bumps the version if holder $2
	// and token $3 still hold the unreleased lease; it returns version,
	// ttl_us and written_at, or no row.
	Renew string

	// RenewMany is Renew for many terms in one statement: one per index of
	// the arrays $1 (names, text), $2 (holders, text), $3 (tokens, bigint)
	// and $4 (TTLs in microseconds, bigint). It returns name, holder, token,
	// version, ttl_us and written_at for each term renewed. It skips, rather
	// than waits for, a row another transaction has locked (a fenced write,
	// a takeover), so one lease never holds up the others: a term without a
	// row was lost or locked, and Renew tells which.
	RenewMany string

	// Release marks the lease of holder $2 and token $3 released and sends a
	// NOTIFY on channel $4 with the lease name as payload, and raises the
	// token mark to the term's token; it returns the name, or no row if that
	// term no longer holds the lease.
	Release string

	// Fence, inside a fenced transaction, returns true and locks the lease
	// row (FOR SHARE) if holder $2 and token $3 still hold the unreleased
	// lease; no row otherwise.
	Fence string

	// GetMany reads the unreleased leases among the names in the text array
	// $1: name, holder, token, version, ttl_us and written_at; a name
	// without a row is free.
	GetMany string

	// List reads every lease, held or released, in name order: name,
	// holder, token, version, ttl_us, released and written_at. It takes no
	// arguments.
	List string
}

// nowMicros is the server's clock in microseconds since the Unix epoch: the
// floor of every new token and version, so that neither repeats after the
// rows were rolled back (a failover to a standby that lagged, a restore).
const nowMicros = `(extract(epoch FROM clock_timestamp()) * 1000000)::bigint`

// TokenSuffix names the token mark table after the lease table.
const TokenSuffix = "_tokens"

// TokenTable returns the quoted name of the token mark of table, quoted as
// For takes it: a one-row table at least as large as every token issued,
// outside the lease rows so that no token goes back when they are lost
// (DELETE, TRUNCATE) after the server's clock stepped back.
func TokenTable(table string) string {
	if strings.HasSuffix(table, `"`) {
		return strings.TrimSuffix(table, `"`) + TokenSuffix + `"`
	}
	return table + TokenSuffix
}

// raiseMark is a CTE that raises the token mark of table to the token of
// each row of the CTE from; row locks are taken lease row first, mark
// second, in every statement, so they cannot deadlock.
func raiseMark(table, from string) string {
	return `mark AS (
	INSERT INTO ` + TokenTable(table) + ` AS m (token) SELECT token FROM ` + from + `
	ON CONFLICT (singleton) DO UPDATE SET token = GREATEST(m.token, excluded.token)
)`
}

// For returns the statements on table, a quoted and schema-qualified name
// such as pglease's Store.Table returns.
func For(table string) Statements {
	return Statements{
		Get: `SELECT holder, token, version, ttl_us, written_at FROM ` + table + ` WHERE name = $1 AND NOT released`,
		Acquire: `WITH cur AS (
	SELECT holder, token, version, ttl_us, written_at, released FROM ` + table + ` WHERE name = $1
), won AS (
	INSERT INTO ` + table + ` AS l (name, holder, token, version, ttl_us, released, written_at)
	SELECT $1, $2::text, GREATEST(` + nowMicros + `, (SELECT token + 1 FROM ` + TokenTable(table) + `)), ` + nowMicros + `,
		$3::bigint, false, now()
	WHERE NOT EXISTS (SELECT 1 FROM cur WHERE NOT released AND NOT (token = $4 AND version = $5))
	ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, token = GREATEST(l.token + 1, excluded.token),
		version = GREATEST(l.version + 1, excluded.version), ttl_us = excluded.ttl_us, released = false, written_at = excluded.written_at
	WHERE l.released OR (l.token = $4 AND l.version = $5)
	RETURNING holder, token, version, ttl_us, written_at
), ` + raiseMark(table, "won") + `
SELECT true, holder, token, version, ttl_us, written_at FROM won
UNION ALL
SELECT false, holder, token, version, ttl_us, written_at FROM cur
WHERE NOT released AND NOT (token = $4 AND version = $5)`,
		Renew: `UPDATE ` + table + ` SET version = GREATEST(version + 1, ` + nowMicros + `), ttl_us = $4, written_at = now()
WHERE name = $1 AND holder = $2 AND token = $3 AND NOT released
RETURNING version, ttl_us, written_at`,
		RenewMany: `WITH mine AS (
	SELECT l.name, b.ttl_us
	FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) AS b(name, holder, token, ttl_us)
	JOIN ` + table + ` AS l ON l.name = b.name AND l.holder = b.holder AND l.token = b.token AND NOT l.released
	FOR NO KEY UPDATE OF l SKIP LOCKED
)
UPDATE ` + table + ` AS l SET version = GREATEST(l.version + 1, ` + nowMicros + `), ttl_us = mine.ttl_us, written_at = now()
FROM mine WHERE l.name = mine.name
RETURNING l.name, l.holder, l.token, l.version, l.ttl_us, l.written_at`,
		Release: `WITH released AS (
	UPDATE ` + table + ` SET released = true, version = GREATEST(version + 1, ` + nowMicros + `), written_at = now()
	WHERE name = $1 AND holder = $2 AND token = $3 AND NOT released
	RETURNING name, token
), ` + raiseMark(table, "released") + `
SELECT released.name FROM released, LATERAL pg_notify($4, released.name)`,
		Fence: `SELECT true FROM ` + table + `
WHERE name = $1 AND holder = $2 AND token = $3 AND NOT released FOR SHARE`,
		GetMany: `SELECT name, holder, token, version, ttl_us, written_at FROM ` + table + ` WHERE name = ANY($1) AND NOT released`,
		List:    `SELECT name, holder, token, version, ttl_us, released, written_at FROM ` + table + ` ORDER BY name`,
	}
}
