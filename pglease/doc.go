// Package pglease is an [elector.Store] on PostgreSQL, for replicas on many
// hosts. It is built on github.com/jackc/pgx/v5.
//
//	store, err := pglease.Open(ctx, "postgres://app@db:5432/app?sslmode=require")
//	...
//	defer store.Close()
//	e, err := elector.New(store, "price-refresh", elector.Config{})
//
// # Table
//
// [Open] (or [New], on a pool of yours) creates one table, by default
// public.leaderaware_leases ([WithSchema], [WithTable]):
//
//	name text PRIMARY KEY, holder text, token bigint, version bigint,
//	ttl_us bigint, released boolean, written_at timestamptz
//
// and a version record next to it (leaderaware_leases_version, see
// [SchemaVersion]). Creation is idempotent and safe when many replicas start
// at once on a fresh database: it runs in one transaction behind a
// transaction-level advisory lock. When the table is already current, Open
// only reads the version, so the runtime role needs no DDL privilege. A table
// from a newer pglease is refused with [ErrSchemaTooNew]; a lease table that
// was dropped while its version record stayed is refused too, and so is a
// table without the lease columns (an application's table, or another
// store's version table, named by [WithTable]).
//
// Schema version 1 kept expiry timestamps. Migrating to version 2 keeps
// every row's holder and token and leaves it held, with the TTL it was last
// given: candidates take such a lease over after watching it for that TTL.
//
// # Time and statements
//
// The store never compares timestamps, the server's or anyone's: a row
// records its holder's TTL and a version that every write bumps, and a
// candidate decides on its own clock that a lease ran out (see the elector
// package). written_at is for display only. Each operation is one autocommit
// statement (a waiting candidate's TryAcquire of a free lease: two); nothing
// lives in the session, and there are no session-level advisory locks (they
// break behind poolers and when a pool recycles a connection):
//
//   - TryAcquire without an observed lease (a waiting candidate's) first
//     reads the lease with a plain SELECT and answers a held lease from it,
//     without a write. A free lease, or the lease the candidate observed, it
//     takes with one statement that reads the lease again and takes it if
//     it still is free or observed: an INSERT ... ON CONFLICT DO UPDATE ...
//     WHERE released OR (token, version) match; a lease held and not
//     observed is answered from that read, without a row lock. The new
//     token is one more than the last and at least the server's clock in
//     microseconds, so tokens keep growing even if the rows are deleted or
//     the table truncated. Every write floors the new version at that
//     clock too, so a row rolled back (a failover to a standby that lagged,
//     a restore) never repeats a version a candidate watched.
//   - Renew is one UPDATE that matches name, holder, token and an unreleased
//     lease and bumps the version; otherwise it reports
//     [elector.ErrLeaseLost].
//   - Release marks the lease released in the same statement that sends the
//     NOTIFY.
//   - A fenced write holds the row FOR SHARE until it commits, which holds
//     off a takeover and the holder's own Renew: keep fenced transactions
//     short.
//
// A statement that fails because the connection broke (the server restarted
// or terminated the backend) is tried once more on a fresh connection when
// running it twice is harmless; otherwise the error is returned, and the
// elector retries.
//
// # Connections
//
// Lease operations run on a pool of two connections that only they use, so
// job queries on [Store.Pool] cannot starve renewals. Every operation is
// bounded by its context; a connection whose operation ran out of time is
// closed and dropped, not handed to the next one. Connecting gives up after
// the DSN's connect_timeout, 10 seconds if it sets none, and the health
// check of a connection idle for a second or more after 2 seconds, unless the
// DSN sets pool_ping_timeout.
//
// A Store works behind a transaction pooler such as PgBouncer in
// transaction mode. Lease statements use pgx's named prepared statements,
// its fastest mode, until one fails the way they fail behind such a pooler
// (a statement missing on the server connection, or there already); the
// Store then switches its lease connections to pgx's cache_describe mode
// for good, logs it at Info, and runs the statement again. Your own
// queries on [Store.Pool], fenced writes included, run in the DSN's mode:
// behind such a pooler, set default_query_exec_mode=cache_describe (or
// exec) in it. LISTEN hears nothing there: the listener warns once, at its first
// keepalive, that it heard not even the notification the store sent it,
// and candidates in other processes then notice a release at their next
// poll; point the DSN at the server or a session-mode pool, or use
// [WithoutListener].
//
// Connections opened by Open carry application_name "leaderaware" unless the
// DSN or [WithApplicationName] says otherwise, so the store's backends are
// easy to find in pg_stat_activity. Errors name the host, port, database and
// user, never the password.
//
// # Watching leases and release notifications
//
// *Store implements [elector.LeaseWatcher]: the candidates waiting on a
// Store make no calls of their own; one goroutine per Store reads every
// lease they wait on in one statement per poll (see [Store.WatchLease]).
// Renewals send no NOTIFY: for 1,000 leases a poll costs the server less
// than a notification per renewal to every listener would.
//
// Release sends NOTIFY on the channel "leaderaware:<schema>.<table>" with the
// lease name as payload. The first [Store.WatchLease] or
// [Store.WatchRelease] starts one listener per Store (a goroutine and a
// connection of its own, outside the pool) that wakes the waiting candidates
// of the released lease, so a handoff between processes takes milliseconds
// instead of a RetryInterval. The listener reconnects with backoff and is
// stopped by [Store.Close]. Polling stays the correctness path:
// [WithoutListener] turns the listener off (e.g. behind a transaction
// pooler, where LISTEN does not work) and candidates then wait for their next
// poll.
//
// # Fenced writes
//
// [Store.Fenced] runs a function in a transaction that first locks the lease
// row FOR SHARE, and only if the term in the context still holds the lease;
// a stale leader gets [elector.ErrLeaseLost] and writes nothing. While the
// transaction is open the lease cannot change hands. A fenced write must
// end by the close of the term's trust window, and the server ends the
// transaction of a process frozen inside one, so that it cannot block a
// takeover. [Store.FencedLease] takes the lease explicitly.
//
// # Tests
//
// The tests that need a server read its DSN from LEADERAWARE_TEST_PG and skip
// without it:
//
//	LEADERAWARE_TEST_PG=postgres://postgres@127.0.0.1:5432/test?sslmode=disable go test -race ./pglease/
//
// They use unique lease names and throwaway schemas, so they may share a
// database with other work. One test terminates the backends of its own
// application_name with pg_terminate_backend.
package pglease
