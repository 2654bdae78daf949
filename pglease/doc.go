// Package pglease is an [elector.Store] on PostgreSQL, for replicas on many
// hosts, built on github.com/jackc/pgx/v5.
//
//	store, err := pglease.Open(ctx, "postgres://app@db:5432/app?sslmode=require")
//	...
//	defer store.Close()
//	e, err := elector.New(store, "price-refresh", elector.Config{})
//
// [Open] creates (or migrates, see [SchemaVersion]) one lease table,
// public.leaderaware_leases by default ([WithSchema], [WithTable]):
//
//	name text PRIMARY KEY, holder text, token bigint, version bigint,
//	ttl_us bigint, released boolean, written_at timestamptz
//
// and a version record next to it. When the table is current, Open only
// reads, so the runtime role needs no DDL privilege.
//
// # How it works
//
// The store compares no timestamps: a row records its holder's TTL and a
// version that every write bumps, and candidates decide expiry on their own
// clocks (written_at is for display). New tokens and versions are floored at
// the server's clock in microseconds, so neither repeats after rows are
// deleted or rolled back (a failover to a lagging standby, a restore).
//
//   - Each lease operation is one autocommit statement on a pool of two
//     connections that job queries on [Store.Pool] never use. Nothing lives
//     in the session (no session-level advisory locks), so the store
//     survives reconnects and poolers. A connection whose operation ran out
//     of time is dropped; a statement that failed because the connection
//     broke is tried once more on a fresh one when running it twice is
//     harmless. Connecting gives up after the DSN's connect_timeout (10s if
//     unset), a pool health check after 2s (pool_ping_timeout).
//   - A waiting candidate's TryAcquire reads the lease with a plain SELECT
//     and answers a held lease without a write; a free or observed lease is
//     taken with one INSERT ... ON CONFLICT DO UPDATE that checks again.
//   - RenewMany renews many terms in one UPDATE over unnest that skips rows
//     locked by a fenced write, then renews those one by one, waiting.
//   - Release sends NOTIFY on "leaderaware:<schema>.<table>" with the lease
//     name. The first [Store.Notify] starts a listener (a goroutine and a
//     connection of its own) that reports them; it reconnects with backoff,
//     pings when idle, and stops at the last stop or [Store.Close].
//     Renewals send no NOTIFY: the core's polls cost the server less.
//   - A fenced write locks the lease row FOR SHARE, which holds off a
//     takeover and the holder's renewals until it ends. The server bounds
//     each statement and idle wait of the transaction by the term's trust
//     (statement_timeout, idle_in_transaction_session_timeout), so a frozen
//     writer cannot block a takeover.
//   - Behind a transaction pooler (PgBouncer in transaction mode), the first
//     error of a named prepared statement (26000, 42P05) switches the lease
//     pool to pgx's cache_describe mode for good, logged at Info. Queries on
//     Store.Pool, fenced writes included, keep the DSN's mode: set
//     default_query_exec_mode=cache_describe there. LISTEN hears nothing
//     behind such a pooler; the listener warns once, at its first
//     keepalive, when it heard not even its own probe.
//   - Schema creation runs in one transaction behind an advisory lock, so
//     replicas starting together on a fresh database neither fail nor see a
//     half-made table. Schema version 1 kept expiry timestamps; migrating
//     keeps every row held with the TTL it was last given.
//
// # Tests
//
// Tests that need a server read its DSN from LEADERAWARE_TEST_PG and skip
// without it; they use throwaway schemas. One test terminates the backends
// of its own application_name.
package pglease
