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
// [Open] (or [New], on a pool of yours) creates one lease table in the DSN's
// database, by default leaderaware_leases ([WithTable]):
//
//	name VARBINARY(255) PRIMARY KEY, holder VARBINARY(255),
//	token, version, ttl_us BIGINT UNSIGNED, released BOOLEAN,
//	written_at DATETIME(6)
//
// and a schema version table next to it (see [SchemaVersion]). When the
// tables are current, Open only reads, so the runtime user needs no DDL
// privilege.
//
// MySQL has no notifications: the elector finds releases and new terms by
// reading every lease its candidates wait on with [Store.GetMany], one
// statement per poll.
//
// On a Galera cluster, point every replica's store at the same node (as
// for any single-writer setup): a row lock on one node does not hold off a
// takeover written on another, so fenced writes would not be fenced.
//
// # How it works
//
// Every lease write is one autocommit statement, which holds the row lock
// only while the server runs it: a process that freezes (SIGSTOP, a paused
// VM) or is cut off between statements, or after sending one, holds no lock
// on a lease row. What a write made that the client does not know (a new
// term's token, a renewal's version) comes back in the OK packet as
// LAST_INSERT_ID(expr), so no write reads its row back. TryAcquire reads
// the row with a plain SELECT and refuses a held lease that is not the one
// observed right there; otherwise an UPDATE whose WHERE repeats the
// compare-and-set on the token and version just read (or an INSERT for a
// new name) takes it, and if the lease changed in between, TryAcquire reads
// again. On MariaDB that write carries the call's deadline (SET STATEMENT
// max_statement_time), so a candidate that gave up waiting for the row lock
// (behind a fenced write) does not take the lease later. Renew and Release
// are one UPDATE each; RenewMany is one UPDATE per 1,000 terms that also
// matches each term's version, so that every new version follows from the
// statement's clock reading, which comes back as LAST_INSERT_ID; it reads
// the rows back only when some term did not match. written_at is the
// writer's wall clock, for display only; TTLs are kept in microseconds,
// rounded up.
//
// A new term's token is GREATEST(previous token + 1, the server's UTC clock
// in microseconds), and every write floors the new version at that clock
// too: tokens keep growing and versions never repeat when someone deletes
// the rows, truncates the table, restores a backup or fails over to a
// replica that lost the last writes, as long as the server's clock is not
// set back by more than the time since the last acquire. No clock is ever
// compared to decide who holds a lease. A high-water mark would put one hot
// row under every acquire, and be lost with the rows on such a failover.
//
// Lease traffic never waits behind job queries: [Open] makes a small pool
// for leases ([WithLeaseConns]; statements interpolated client-side, one
// round trip each, autocommit forced on whatever the DSN says) and one for
// the jobs, [Store.DB]; [New] reserves its lease connections from the
// caller's pool until Close and replaces one the server closed. There are
// no GET_LOCK locks: they belong to a session (a pool recycles sessions),
// have no TTL, and Galera refuses them.
//
// A fenced write's transaction reads the lease row with LOCK IN SHARE MODE
// (MySQL's FOR SHARE) where the token and holder match and it is not
// released, before fn and after it; the share lock holds off a takeover, a
// release and the holder's own renewals until the commit. Fenced writes
// are the only lease-row locks held across round trips, so the server
// bounds their transaction by the term's trust left
// (innodb_lock_wait_timeout, wait_timeout, and max_statement_time on
// MariaDB or max_execution_time on MySQL, set on its connection and
// restored after).
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
// proxy, right after it sent a lease write, and check that a candidate
// still takes over after the TTL.
package mysqllease
