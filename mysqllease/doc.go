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
// and a schema version table next to it ([SchemaVersion]). When the tables
// are current, Open only reads: the runtime user needs no DDL privilege.
//
// MySQL has no notifications: while candidates wait, the Store reads one
// aggregate of the table every [WithPollInterval] to learn of acquires and
// releases ([Store.Notify]), and the elector then reads the leases they
// wait on with [Store.GetMany], one statement.
//
// On a Galera cluster, point every replica's store at the same node (as
// for any single-writer setup): a row lock on one node does not hold off a
// takeover written on another, so fenced writes would not be fenced.
//
// # How it works
//
// Every lease write is one autocommit statement, so a process that freezes
// or is cut off between statements holds no lock on a lease row, and what
// it made that the client does not know (a new term's token, a renewal's
// version) comes back in the OK packet as LAST_INSERT_ID(expr). TryAcquire
// reads the row and takes it with an UPDATE whose WHERE repeats the
// compare-and-set on the token and version just read (or an INSERT).
//
// A new term's token is GREATEST(previous token + 1, the server's UTC clock
// in microseconds), and every write floors the new version at that clock
// too: tokens grow and versions never repeat when someone deletes the rows,
// truncates the table, restores a backup or fails over to a replica that
// lost the last writes, as long as the server's clock is not set back by
// more than the time since the last acquire. No clock is ever compared to
// decide who holds a lease. (A high-water mark would put one hot row under
// every acquire, and be lost with the rows on such a failover.) There are
// no GET_LOCK locks: they belong to a session (a pool recycles sessions),
// have no TTL, and Galera refuses them.
package mysqllease
