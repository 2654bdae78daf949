// Package pglease is an [elector.Store] on PostgreSQL, for replicas on many
// hosts, built on github.com/jackc/pgx/v5.
//
//	store, err := pglease.Open(ctx, "postgres://app@db:5432/app?sslmode=require")
//	...
//	defer store.Close()
//	e, err := elector.New(store, "price-refresh", elector.Config{})
//
// [Open] creates or migrates one lease table (public.leaderaware_leases by
// default) and, next to it, a version record and a token mark; when they are
// current it only reads, so the runtime role needs no DDL privilege, only
// SELECT, INSERT and UPDATE on the lease table and on the token mark
// (<table>_tokens).
//
// # How it works
//
//   - No timestamp is compared: a row records its holder's TTL and a version
//     that every write bumps (written_at is for display). New tokens and
//     versions are floored at the server's clock in µs, so neither repeats
//     after rows are rolled back; tokens also exceed a mark, one row that
//     each acquire and release raises in the same statement, so they never
//     go back after rows are deleted or truncated, whatever the clock does.
//   - Each lease operation is one autocommit statement on a pool of two
//     connections that [Store.Pool]'s jobs never use, with nothing in the
//     session, so reconnects and poolers are harmless. A connection whose
//     operation ran out of time is dropped; a statement that failed on a
//     broken connection runs once more on a fresh one when that is
//     harmless. Connecting gives up after connect_timeout (default 10s), a
//     health check after pool_ping_timeout (default 2s).
//   - A waiting candidate's TryAcquire answers a held lease from a plain
//     SELECT; a free or observed lease is taken with one upsert that checks
//     again. RenewMany is one UPDATE over unnest that skips rows a fenced
//     write has locked, then renews those alone, waiting.
//   - Release sends NOTIFY on "leaderaware:<schema>.<table>" with the lease
//     name; renewals send none. The first [Store.Notify] starts a listener
//     (a goroutine and a connection of its own) that reconnects with
//     backoff, pings when idle, and stops at the last stop or Close.
//   - A fenced write locks the lease row FOR SHARE, which holds off a
//     takeover and the holder's renewals; the server bounds its statements
//     and idle waits by the term's trust (statement_timeout,
//     idle_in_transaction_session_timeout), so a frozen writer cannot block
//     a takeover.
//   - Behind a transaction pooler (PgBouncer in transaction mode), the first
//     named prepared statement error switches the lease pool to pgx's
//     cache_describe mode, logged at Info; queries on Store.Pool keep the
//     DSN's mode (set default_query_exec_mode=cache_describe). LISTEN is
//     deaf there: the listener warns once when it hears not even its probe.
//   - Schema creation runs in one transaction behind an advisory lock, so
//     replicas starting together neither fail nor see a half-made table.
//
// Tests that need a server read its DSN from LEADERAWARE_TEST_PG and skip
// without it.
package pglease
