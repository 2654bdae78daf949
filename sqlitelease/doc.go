// Package sqlitelease is an [elector.Store] in one SQLite file, for
// candidates that all run on one host: the embedded default of leaderaware.
// It uses modernc.org/sqlite (pure Go, no cgo).
//
// The store's two tables, leaderaware_meta and leaderaware_lease, share the
// file with the jobs' own tables; lease rows are never deleted, and the
// schema version lives in leaderaware_meta (PRAGMA user_version is left to
// the jobs). A job that keeps its data in the file can make its writes
// conditional on still leading with [Store.Fenced].
//
// All candidates must run on one host, through one directory: SQLite's
// locks and WAL shared memory do not work across hosts, and SQLite keeps
// the -wal and -shm files next to the path it opens, so a hard link or a
// bind mount of the file alone (docker run -v /host/app.db:/data/app.db)
// would give the file a second log, and two leaders. Mount the directory
// instead. Symbolic links are fine.
//
// # How it works
//
// Every connection runs with journal_mode=WAL, synchronous=NORMAL (a power
// loss may forget the last commits, never corrupt the file), busy_timeout
// and BEGIN IMMEDIATE. Lease operations run one at a time on one connection
// kept out of the [Store.DB] pool, each one statement (TryAcquire is an
// INSERT … ON CONFLICT DO UPDATE … WHERE the row is released or still the
// observed term); a busy database is retried until the caller's context
// ends. The store compares no times: candidates decide expiry on their own
// clocks (see package elector); the wall clock only floors new tokens and
// versions, so that a file restored from an older copy never repeats one.
//
// Tokens: a new token is above the row's last one, the file's high-water
// mark (kept by triggers; it survives deleted rows) and the wall clock in
// µs. On Linux it is also above a mark in the first 8 bytes of <db>-live,
// raised in the transaction that issues the token (without fsync), so that
// tokens keep growing after the database file is deleted even if the clock
// was stepped back. Nothing removes <db>-live.
//
// Process death (Linux): each Store holds an open-file-description lock
// (F_OFD_SETLK) on one random byte of <db>-live from Open to Close, and
// records the file and byte in the rows it acquires and renews. The kernel
// drops the lock only when the process dies or closes the file; a stopped
// process keeps it. A lease whose holder's byte is unlocked (F_OFD_GETLK)
// is taken over at once, and [Store.GetMany] reports it free. Close first
// clears the records of the leases it still holds (their jobs may still
// run), then drops the lock. Elsewhere the elapsed-time rule alone applies.
//
// Wake-ups: a Store touches <db>-live after each new term and release, and
// a dying process closes it; [Store.Notify] learns of both through inotify,
// and elsewhere from two counters that triggers keep (the high-water mark
// and the count of released terms), read every watch interval.
//
// One file, one path (Linux): each Store also holds a read lock on the
// database file itself at a byte that stands for the directory and name it
// came through, and refuses a file with a second name or with another
// Store's lock on another byte ([ErrSecondPath]). Closing any descriptor of
// a file drops every POSIX lock the process holds on it, SQLite's included,
// so database file descriptors live in one table per process, closed only
// when nothing in the process locks the file.
//
// A replaced file: every write checks that the path still names the file
// the Store opened. A file moved over it (a restore) is opened in its
// place: the Store ends its terms on the old file, and marks the new file's
// leases held, so that candidates wait one TTL for them (a job of an old
// term may still run), with tokens above every token issued before.
//
// One writer at a time: a fenced write holds SQLite's write lock while fn
// runs, and no lease in the file can be written meanwhile; its context ends
// with the term's trust window, and then its transaction rolls back.
package sqlitelease
