// Package sqlitelease is an [elector.Store] in one SQLite file, for
// candidates that all run on one host: the embedded default of leaderaware.
// It uses modernc.org/sqlite (pure Go, no cgo).
//
// # The file
//
// [Open] creates the file with mode 0600 (SQLite gives the -wal and -shm
// files the same mode) and two tables, which share the file with the jobs'
// own tables:
//
//	leaderaware_meta  (key TEXT PRIMARY KEY, value)   -- 'schema_version' → SchemaVersion
//	leaderaware_lease (
//		name        TEXT PRIMARY KEY,  -- the lease name
//		holder      TEXT,              -- the current or last holder
//		token       INTEGER,           -- fencing token: +1 on every new term
//		expires_at  INTEGER,           -- Unix ms; <= now means free
//		acquired_at INTEGER            -- Unix ms, start of the term
//	)
//
// Lease rows are never deleted, so tokens never reset; a release sets
// expires_at to now. The schema version lives in leaderaware_meta rather
// than PRAGMA user_version, which is left to the jobs. Open migrates an
// older file in one transaction and refuses a newer one ([ErrSchemaTooNew]).
//
// Every connection runs with journal_mode=WAL (Open fails with [ErrNotWAL]
// if SQLite cannot use it), synchronous=NORMAL (a power loss may forget
// the last commits, never corrupt the file), busy_timeout (see
// [WithBusyTimeout]) and BEGIN IMMEDIATE transactions.
//
// # Lease operations
//
// Each lease operation is one autocommit statement on one dedicated
// connection with prepared statements, kept out of the [Store.DB] pool so
// that renewals never queue in Go's pool behind job work: TryAcquire is an
// INSERT … ON CONFLICT DO UPDATE … WHERE expires_at <= now RETURNING, Renew
// and Release an UPDATE of the row whose name, holder and token match. A
// busy database (SQLITE_BUSY or SQLITE_LOCKED) is retried with a short
// backoff until the caller's context ends, so callers never see those
// errors.
//
// # Clock and hosts
//
// now is the Go process's wall clock, in milliseconds, passed into each
// statement. All candidates must therefore share one clock: one host. Do not
// put the file on a network filesystem; Open refuses NFS, SMB/CIFS and FUSE
// on Linux unless given [AllowNetworkFS]. For many hosts use pglease.
//
// A holder trusts its lease by its own monotonic clock (see package
// elector), while the store expires leases by the wall clock. A forward step
// of the wall clock therefore expires leases early, and another candidate
// could take over while the old holder still trusts its term. Keep the clock
// disciplined (NTP slews rather than steps); fenced writes stay safe
// regardless, because they check the store.
//
// # Handoff
//
// A Store implements [elector.ReleaseWatcher]. A release through a Store
// wakes that Store's waiting candidates at once. For candidates in other
// processes, one goroutine per Store, running only while someone waits,
// polls PRAGMA data_version (a cheap read of the WAL index) every
// [DefaultWatchInterval] and, when the file changed, wakes the watchers of
// leases that are now free. Handoff between processes thus takes a few tens
// of milliseconds instead of a RetryInterval.
//
// # Fenced writes
//
// A job that keeps its data in the same file can make its writes
// conditional on still leading: [Store.Fenced] runs the job's statements in
// a transaction that commits only if the term in the context is still the
// current, unexpired term of its lease, checked inside the transaction at its
// start and right before commit. A stale leader's write is rolled back with
// [elector.ErrLeaseLost]. The transaction holds SQLite's write lock, so keep
// it short.
package sqlitelease
