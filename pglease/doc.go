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
//	name text PRIMARY KEY, holder text, token bigint,
//	expires_at, acquired_at, renewed_at timestamptz
//
// and a version record next to it (leaderaware_leases_version, see
// [SchemaVersion]). Creation is idempotent and safe when many replicas start
// at once on a fresh database: it runs in one transaction behind a
// transaction-level advisory lock. When the table is already current, Open
// only reads the version, so the runtime role needs no DDL privilege. A table
// from a newer pglease is refused with [ErrSchemaTooNew].
//
// Rows are never deleted and a token only grows, so a token is never reused
// (fencing depends on it).
//
// # Time and statements
//
// Time is the server's: expiries are computed and compared with now() in SQL,
// so clock skew between replicas does not matter. Each operation is one
// autocommit statement; nothing lives in the session, and there are no
// session-level advisory locks (they break behind poolers and when a pool
// recycles a connection):
//
//   - TryAcquire reads the lease first. Candidates that find a live holder
//     (the holder itself included) get an *[elector.HeldError] from that plain
//     SELECT and take no row lock. A free or expired lease is taken by an
//     INSERT ... ON CONFLICT DO UPDATE ... WHERE expires_at <= now().
//   - Renew is one UPDATE that matches name, holder, token and an unexpired
//     lease; otherwise it reports [elector.ErrLeaseLost].
//   - Release sets expires_at to now() in the same statement that sends the
//     NOTIFY.
//   - A fenced write checks the lease against clock_timestamp(), the time of
//     the check itself rather than of its transaction's start, and holds the
//     row FOR SHARE until it commits (which also holds off the holder's own
//     Renew: keep fenced transactions short).
//
// A statement that fails because the connection broke (the server restarted
// or terminated the backend) is tried once more on a fresh connection when
// running it twice is harmless; otherwise the error is returned, and the
// elector retries.
//
// # Release notifications
//
// Release sends NOTIFY on the channel "leaderaware:<schema>.<table>" with the
// lease name as payload. *Store implements [elector.ReleaseWatcher]: the first
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
// transaction is open the lease cannot change hands. [Store.FencedLease]
// takes the lease explicitly.
//
// # Connections and errors
//
// Connections opened by Open carry application_name "leaderaware" unless the
// DSN or [WithApplicationName] says otherwise, so the store's backends are
// easy to find in pg_stat_activity. Errors name the host, port, database and
// user, never the password.
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
