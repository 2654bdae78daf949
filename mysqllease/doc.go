// Package mysqllease is an [elector.Store] on MySQL or MariaDB, for
// replicas on many hosts. It is built on github.com/go-sql-driver/mysql and
// lives in a module of its own, so that users of the root module never
// download the driver.
//
//	store, err := mysqllease.Open(ctx, "app:secret@tcp(db:3306)/app")
//	...
//	defer store.Close()
//	e, err := elector.New(store, "price-refresh", elector.Config{})
//
// # Table
//
// [Open] (or [New], on a pool of yours) creates one lease table in the DSN's
// database, by default leaderaware_leases ([WithTable]):
//
//	name VARBINARY(255) PRIMARY KEY, holder VARBINARY(255),
//	token, version, ttl_us BIGINT UNSIGNED, released BOOLEAN,
//	written_at DATETIME(6)
//
// and a schema version table next to it (leaderaware_leases_version, see
// [SchemaVersion]). Creation is safe when many replicas start at once on a
// fresh database: every step is idempotent (CREATE TABLE IF NOT EXISTS,
// INSERT IGNORE), with no named lock. When the tables are current, Open only
// reads, so the runtime user needs no DDL privilege. A table from a newer
// mysqllease is refused with [ErrSchemaTooNew]; a version table whose lease
// table was dropped, with [ErrTableMissing].
//
// # Leases
//
// The store keeps no clock: a candidate decides on its own clock when a
// holder's lease has run out (see the elector package), and every store
// operation is a compare-and-set on the lease row by token and version.
// Every write is one autocommit statement, which holds the row lock only
// while the server runs it: a process that freezes (SIGSTOP, a paused VM)
// or is cut off between statements, or after sending one, holds no lock on
// a lease row, so it cannot keep a candidate from taking over or the holder
// from renewing. What a write made that the client does not know already
// (a new term's token, a renewal's version) comes back in the statement's
// OK packet as LAST_INSERT_ID(expr), so no write reads its row back:
//
//   - TryAcquire reads the row with a plain SELECT; a held lease that is not
//     the one the candidate observed is refused right there with an
//     *[elector.HeldError], without locks. Otherwise an UPDATE takes it
//     whose WHERE repeats the compare-and-set on the token and version just
//     read (free, or still observed), or an INSERT for a new name; if the
//     lease changed in between, nothing matches and TryAcquire reads again.
//     On MariaDB the write carries the call's deadline (SET STATEMENT
//     max_statement_time), so a candidate that gave up while it waited for
//     the row lock (behind a fenced write) does not take the lease later.
//   - Renew is one UPDATE matching name, token and holder of an unreleased
//     lease, which bumps the version and records the TTL.
//     [elector.ErrLeaseLost] if nothing matched.
//   - Release is one UPDATE that sets released and bumps the version; the
//     row and its token stay. The new version comes back as LAST_INSERT_ID,
//     so the Store's watchers learn the released state without a read.
//   - Get is one SELECT.
//
// written_at is the writer's wall clock, in UTC, for display only. TTLs are
// stored in microseconds, rounded up, and read back saturating at the
// longest Duration.
//
// # Tokens
//
// A new term's token is GREATEST(previous token + 1, the server's clock in
// microseconds since 1970): the clock floor, rather than a high-water mark
// kept outside the lease rows. On an intact row the +1 alone makes tokens
// grow. The floor keeps them growing when someone deletes the rows or
// truncates the table, or a failover to a replica loses the last writes:
// the new row's token is a clock reading later than the readings that made
// the earlier tokens. It assumes only that the server's clock (or its
// replacement's) is not set back by more than the time since the last
// acquire; tokens outrun the clock only at more than one term per
// microsecond. No clock is ever compared to decide who holds a lease. A
// high-water mark would put one hot row under every acquire of every name
// and, on a failover that loses writes, be lost with them. Versions are
// floored at the same clock by every write, so a row rolled back by such a
// failover or a restore never repeats a version a candidate watched.
//
// # Connections
//
// Lease traffic never waits behind job queries. [Open] makes two pools from
// the DSN: a small one for leases ([WithLeaseConns], default
// [DefaultLeaseConns]; statements interpolated client-side, one round trip
// each) and one for the jobs, [Store.DB]. [New] reserves its lease
// connections from the caller's pool and keeps them until Close; a reserved
// connection the server closed is noticed before use and replaced.
//
// Each lease statement must commit on its own: Open's lease pool overrides
// an autocommit=0 in the DSN (an ORM's setting stays on [Store.DB], where
// fenced writes begin their own transactions), and New refuses a pool
// whose connections have autocommit off. Both refuse a read-only session
// (tx_read_only or transaction_read_only) or server (read_only, a
// replica), on which every campaign would fail.
//
// Unless the DSN sets them, Open sets the driver's timeout, readTimeout and
// writeTimeout ([DefaultDialTimeout], [DefaultReadTimeout],
// [DefaultWriteTimeout]), so that a dead or silent server fails a call
// rather than hanging it. Errors name the user, address and database, never
// the password.
//
// There are no GET_LOCK locks: they belong to a session (a pool recycles
// sessions), have no TTL, and Galera refuses them.
//
// # Watching leases
//
// *Store implements [elector.LeaseWatcher] and [elector.ReleaseWatcher] by
// polling, so that candidates waiting on a Store make no store calls of
// their own: the first watcher starts one poller goroutine per Store, and
// the last one's stop or [Store.Close] ends it. It reads every watched
// lease together, one primary-key SELECT per 500 names, at once when a
// watcher comes and then every poll interval at most ([WithPollInterval],
// default 250ms, each interval drawn between half of it and all of it;
// shorter if a watcher asks for it): 4 to 8 polls a second per Store at
// the default, whatever the number of watchers, and none while nobody
// watches. A release by another process reaches this one's candidates
// within one interval; a release through the same Store, at once.
//
// # Fenced writes
//
// [Store.Fenced] runs a function in a transaction on [Store.DB] that first
// reads the lease row with LOCK IN SHARE MODE (MySQL's FOR SHARE), checking
// the token, holder and released flag of the term that the context
// carries, and commits only if the term has neither ended nor outlived its
// trust window. A stale leader gets [elector.ErrLeaseLost] and writes
// nothing; while the transaction is open the lease cannot change hands.
// Fenced writes are the only lease-row locks held across round trips, so
// the server bounds their transaction by the lease TTL
// (innodb_lock_wait_timeout, wait_timeout, and max_statement_time on
// MariaDB or max_execution_time on MySQL, set on its connection and
// restored after).
//
// On a Galera cluster, point every replica's store at the same node (as
// for any single-writer setup): a row lock on one node does not hold off a
// takeover written on another, so fenced writes would not be fenced.
//
// # Tests
//
// The tests that need a server read its DSN from LEADERAWARE_TEST_MYSQL. They
// skip without it, unless CI is set: then, as when the server cannot be
// reached, they fail.
//
//	LEADERAWARE_TEST_MYSQL='root@tcp(127.0.0.1:3306)/test' go test -race ./...
//
// Each test makes tables with random names and drops them, so the tests may
// share a database with other work. On Linux, TestFailoverProcesses and
// TestChaosProcesses run the test binary itself as replica processes, and
// crash, freeze and stop them; the chaos schedule runs 20s
// (-chaos.duration, -chaos.seed). TestFrozenHolderMidRenew and
// TestFrozenCandidateMidTakeover freeze one store connection, through a
// proxy, right after it sent a lease write, as SIGSTOP would freeze its
// process, and check that a candidate still takes over after the TTL. The
// benchmarks include failover times
// (BenchmarkFailover) and the client CPU of 1,000 leases
// (BenchmarkClientCPU).
package mysqllease
