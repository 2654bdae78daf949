// Package sqlitelease is an [elector.Store] in one SQLite file, for
// candidates that all run on one host: the embedded default of leaderaware.
// It uses modernc.org/sqlite (pure Go, no cgo).
//
// # The file
//
// [Open] creates the file with mode 0600 (SQLite gives the -wal and -shm
// files the database file's mode and, as root, its owner, and so does the
// store to the -live file it adds on Linux, see Process death and Tokens)
// and two tables, which share the file with the jobs' own tables:
//
//	leaderaware_meta (key TEXT PRIMARY KEY, value)
//		-- 'schema_version'   → SchemaVersion
//		-- 'token_high_water' → the largest token the file has issued
//		-- 'released_terms'   → how many terms were released (or their row deleted)
//	leaderaware_lease (
//		name         TEXT PRIMARY KEY,  -- the lease name
//		holder       TEXT,              -- the current or last holder
//		token        INTEGER,           -- fencing token of the term
//		version      INTEGER,           -- grows with every write of the row
//		ttl_ms       INTEGER,           -- the holder's TTL, in ms, rounded up
//		released     INTEGER,           -- 1 once the term was released
//		written_at   INTEGER,           -- Unix ms of the last write, for display
//		live_file    TEXT,              -- the holder Store's liveness file,
//		live_offset  INTEGER,           --   the byte it locks, and the version
//		live_version INTEGER            --   they were written with (NULL: unknown)
//	)
//
// Lease rows are never deleted. The schema version lives in
// leaderaware_meta rather than PRAGMA user_version, which is left to the
// jobs. Open migrates an older file in one transaction and refuses a newer
// one ([ErrSchemaTooNew]).
//
// Every connection runs with journal_mode=WAL (Open fails with [ErrNotWAL]
// if SQLite cannot use it), synchronous=NORMAL (a power loss may forget
// the last commits, never corrupt the file), busy_timeout (see
// [WithBusyTimeout]) and BEGIN IMMEDIATE transactions.
//
// A Store works on the file it opened, and never on a file other processes
// no longer see. If the path later names another file or none, or the file
// is emptied (deleted, replaced or truncated under a running process) or
// moved into a new directory put in place of its own, the terms on it end:
// a holder's next renewal fails with [ErrFileChanged]. A file moved over it
// (a restore: move the file in and remove the old -wal and -shm in the same
// step, or SQLite reads the old log into it) is opened in its place, and
// its leases are taken over by the elapsed-time rule only, since jobs of
// the old file's terms may still run: leadership resumes about one TTL
// later, with tokens above every token issued before. While no usable file
// is at the path, operations fail with ErrFileChanged and [Store.Healthy]
// says so.
//
// # One file, one path
//
// SQLite keeps the -wal and -shm files next to the path it opens, so every
// process must reach the file through one directory and one name: a hard
// link, or a bind mount of the file alone (docker run -v
// /host/app.db:/data/app.db), would give the file a second log, and two
// leaders. Mount or share the directory that holds the file instead.
// Symbolic links are fine: Open resolves them first, and the side files
// are next to the target. Paths mean what they mean to the kernel: a ".."
// after a link is the parent of its target, and a relative path starts
// from the working directory itself, not from the $PWD that reached it. On
// Linux, Open refuses a file with a second name or that another Store has
// open through another directory or name, and every write checks for a
// second name again ([ErrSecondPath]).
//
// # Tokens
//
// A new token is larger than the row's last one, than the file's
// high-water mark (which triggers keep, and which survives deleted rows),
// and not below the wall clock in microseconds (which survives a deleted
// file, a file restored from an older copy, and a power cut that rolls back
// the last commits, as long as the clock is not stepped back meanwhile).
//
// On Linux it is also larger than a second high-water mark kept outside the
// database, in the first 8 bytes of <db>-live (big-endian): the largest
// token ever issued next to this path. Each acquire reads it and raises it
// in the transaction that issues the token, before the commit, so it
// survives the deletion of the database file with its -wal and -shm files
// even after the clock was stepped back; Open also raises it to the file's
// own mark, for tokens issued by an older release. Renewals do not touch
// it. The raise is not synced to disk: a power cut may lose it, as it may
// lose the database's last commits, and then the database's own mark, or
// else the clock floor, covers them. Nothing removes <db>-live; delete it along with the database only
// if tokens may start over from the clock (an operator who deletes both and
// steps the clock back can see a token come again). Outside Linux there is
// no such file: a deleted database leaves the clock floor alone.
//
// # Lease operations
//
// Each lease operation is one autocommit statement on one dedicated
// connection with prepared statements, kept out of the [Store.DB] pool so
// that renewals never queue in Go's pool behind job work (on Linux,
// TryAcquire's statement runs in an IMMEDIATE transaction with the read and
// raise of the high-water mark in <db>-live, see Tokens). TryAcquire is an
// INSERT … ON CONFLICT DO UPDATE … WHERE (the row is released, or has the
// observed token and version) RETURNING; Renew and Release are UPDATEs of
// the unreleased row whose name, holder and token match. A busy database
// (SQLITE_BUSY or SQLITE_LOCKED) is retried with a short backoff until the
// caller's context ends, so callers never see those errors.
//
// # Clocks and hosts
//
// The store compares no times. Candidates decide that a lease ran out by
// watching it unchanged for its TTL on their own clocks (see package
// elector), so no step of the wall clock can make two leaders; the wall
// clock only floors new tokens and versions (so that a file restored from
// an older copy never repeats a version a candidate watched) and stamps
// written_at for display.
//
// All candidates must run on one host, because SQLite's locks and the WAL's
// shared memory do not work across hosts. Do not put the file on a network
// filesystem; Open refuses NFS, SMB/CIFS, FUSE, 9P, CephFS, AFS, Coda and
// the cluster filesystems (OCFS2, GFS2, Lustre, GPFS, BeeGFS, OrangeFS) on
// Linux unless given [AllowNetworkFS]. For many hosts use pglease.
//
// # One writer at a time
//
// SQLite lets one connection write the file at a time. Lease operations are
// short writes, but a fenced write holds the write lock for as long as the
// job's function runs, and while it does no lease in the file can be
// renewed, released or taken over. A process frozen inside a fenced write
// (SIGSTOP, a debugger, a paused VM) therefore stalls every lease in the
// file until it resumes or dies: holders end their terms when their trust
// windows close, and candidates wait, so there is no leader, never two. When
// the frozen writer resumes, [Store.Fenced] refuses its commit if its term
// ended meanwhile; a commit that goes through lands before any takeover.
// Keep fenced functions short, and keep slow work out of them.
//
// # Handoff
//
// A Store implements [elector.LeaseWatcher], so waiting candidates make no
// store calls of their own. A release through a Store reaches that Store's
// waiting candidates at once. For changes by other processes, one goroutine
// per Store, running only while someone waits, reads two counters that
// triggers keep in leaderaware_meta (the token high-water mark, which every
// new term raises, and the count of released terms). On Linux it does so
// when the liveness file (see Process death) tells it that another Store
// began or ended a term, and then tests the liveness of the holders;
// elsewhere every [DefaultWatchInterval]. When a counter changed, and
// otherwise once per the candidates' RetryInterval, it reads every watched
// lease that changed in one statement and hands each candidate its new
// state: a renewal restarts its watch, a free lease wakes it. Handoff
// between processes thus takes about a millisecond on Linux instead of a
// RetryInterval, and renewals by a leader of many leases cost its
// followers one read per RetryInterval.
//
// # Process death
//
// On Linux each Store opens the file <db>-live next to the database and,
// from Open to Close, holds an open-file-description lock (F_OFD_SETLK) on
// one byte of it, at a random offset below 2^62. Every acquire and renew
// records the file and the byte in the lease row; the record counts only
// while the row keeps the version it was written with. The kernel drops the
// lock when the process dies, and only then: a stopped or frozen process
// keeps it. So a TryAcquire that finds a lease held by another Store tests
// that byte (F_OFD_GETLK), and if no lock is on it, no process of that
// holder can still run the job: it takes the lease over at once, with a
// compare-and-set on the version it just read. While candidates wait, the
// goroutine that watches the file for them (see Handoff) also tests the
// byte of each holding Store they wait for whenever a process closes the
// liveness file (the kernel reports it, through inotify, and a process
// that dies closes it), and at least every [DefaultWatchInterval]. It wakes
// them when the lock is gone, so a crashed holder is replaced within
// milliseconds instead of one TTL. Close first clears the record of the
// leases its Store still holds (their jobs may still run, so candidates
// wait the elapsed-time rule for them), then drops the lock. Containers that
// share the host's kernel and the database's volume see each other's locks
// and get the same. Outside Linux, and for a row without a valid record
// (written by an older release, or through another -live file than the
// candidate's), the elapsed-time rule alone applies. Open refuses a -live
// file that is not a regular file, empty or holding a token high-water mark
// (see Tokens), or that cannot be locked. Releases older than that mark
// refuse to open a -live file that holds one: do not go back to them
// without deleting the -live file while no process has the database open.
//
// # Fenced writes
//
// A job that keeps its data in the same file can make its writes
// conditional on still leading: [Store.Fenced] runs the job's statements in
// a transaction that commits only if the term in the context has not ended
// (nor outlived its trust window, which counts time the machine was
// suspended) and its lease still has the term's token and holder and is not
// released,
// checked inside the transaction at its start and right before commit. A
// stale leader's write is rolled back with [elector.ErrLeaseLost].
package sqlitelease
