package sqlitelease

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/clock"
)

// ErrClosed is returned by the methods of a [Store] after [Store.Close].
var ErrClosed = errors.New("sqlitelease: store is closed")

// Store is an [elector.Store] on one SQLite file, for candidates on one host.
// It also implements [elector.ReleaseWatcher], and offers fenced writes to
// the jobs that keep their data in the same file ([Store.Fenced]).
//
// A Store is safe for concurrent use. Open one Store per file per process
// and share it; Close it when the program is done with it.
type Store struct {
	path string      // as given to Open, for error messages
	abs  string      // the absolute path
	file os.FileInfo // the database file as Open found it
	cfg  config
	db   *sql.DB
	live *sidecar // the liveness lock; nil outside Linux
	// recorded is set once a statement may have recorded live in a lease
	// row: Close has rows to clear only after that.
	recorded atomic.Bool

	// leaseSem (capacity 1) serializes lease operations on lc; waiting for
	// it respects the caller's context. It guards lc and closed.
	leaseSem chan struct{}
	lc       *leaseConn // nil after Close, or after the connection broke
	closed   bool

	watch watchState

	isClosed  atomic.Bool // set when Close starts
	closeOnce sync.Once
	closeErr  error
}

// Compile-time checks of the interfaces a Store promises.
var (
	_ elector.Store          = (*Store)(nil)
	_ elector.ReleaseWatcher = (*Store)(nil)
)

// ErrFileChanged is returned by the operations of a [Store] whose database
// file was deleted, replaced by another file, or truncated to nothing since
// [Open]. The Store then works on a file that other processes no longer
// see, so it refuses to go on; a Renew's error also matches
// [elector.ErrLeaseLost], which ends the term. Close the Store and Open the
// path again.
var ErrFileChanged = errors.New("the database file was deleted, replaced or truncated since Open; close the store and open the path again")

// The lease statements. Each is one autocommit statement. None compares
// times: written_at is for display.
const (
	// acquireSQL starts a new term (?1 name, ?2 holder, ?3 TTL in ms) if
	// the lease is new, released, or still the observed term (?4 token, ?5
	// version), and returns its token and version; otherwise it returns no
	// row. The token exceeds the row's last one and every token the file
	// ever issued (the high-water mark, which survives deleted rows), and
	// is at least ?6: the wall clock in microseconds, which survives a lost
	// file or a rolled-back commit, or on Linux one above the high-water
	// mark of the liveness file if that is higher, which survives a lost
	// file whatever the clock does (see Store.issue). ?7 is the wall clock
	// in ms. ?8 and ?9 are the Store's liveness file and byte (NULL if it
	// has none).
	acquireSQL = `INSERT INTO ` + leaseTable + ` (name, holder, token, version, ttl_ms, released, written_at,
	live_file, live_offset, live_version)
VALUES (?1, ?2, max(?6, coalesce((SELECT value FROM ` + metaTable + ` WHERE key = '` + highWaterKey + `'), 0) + 1), 1, ?3, 0, ?7,
	?8, ?9, 1)
ON CONFLICT (name) DO UPDATE SET
	holder = excluded.holder,
	token = max(token + 1, excluded.token),
	version = version + 1,
	ttl_ms = excluded.ttl_ms,
	released = 0,
	written_at = excluded.written_at,
	live_file = excluded.live_file,
	live_offset = excluded.live_offset,
	live_version = version + 1
WHERE released OR (token = ?4 AND version = ?5)
RETURNING token, version`
	// getSQL reads the current, unreleased term of a lease, with its
	// holder's liveness file and byte if the row's version is the one they
	// were recorded with (NULL otherwise: unknown).
	getSQL = `SELECT holder, token, version, ttl_ms, written_at,
	CASE WHEN live_version = version THEN live_file END,
	CASE WHEN live_version = version THEN live_offset END
FROM ` + leaseTable + `
WHERE name = ?1 AND NOT released`
	// renewSQL records a new TTL (?4 ms) for the term ?1 ?2 ?3 (name,
	// holder, token) if it is still current and unreleased, and bumps the
	// version. ?5 is the wall clock in ms; ?6 and ?7 the Store's liveness
	// file and byte.
	renewSQL = `UPDATE ` + leaseTable + ` SET version = version + 1, ttl_ms = ?4, written_at = ?5,
	live_file = ?6, live_offset = ?7, live_version = version + 1
WHERE name = ?1 AND holder = ?2 AND token = ?3 AND NOT released
RETURNING version`
	// releaseSQL marks the term ?1 ?2 ?3 released if it is still current,
	// and bumps the version. It never touches the token.
	releaseSQL = `UPDATE ` + leaseTable + ` SET released = 1, version = version + 1, written_at = ?4
WHERE name = ?1 AND holder = ?2 AND token = ?3 AND NOT released`
)

// leaseConn is the one connection that carries lease traffic, with its
// prepared statements. It is taken out of the pool for the store's lifetime,
// so renewals never wait in Go's pool behind job work.
type leaseConn struct {
	conn                         *sql.Conn
	acquire, get, renew, release *sql.Stmt
	begin, commit, rollback      *sql.Stmt // of the transaction of Store.issue
}

func newLeaseConn(ctx context.Context, db *sql.DB) (*leaseConn, error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	lc := &leaseConn{conn: c}
	if err := lc.prepare(ctx); err != nil {
		_ = lc.close()
		return nil, err
	}
	return lc, nil
}

// prepare prepares the lease statements on the connection.
func (lc *leaseConn) prepare(ctx context.Context) error {
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&lc.acquire, acquireSQL}, {&lc.get, getSQL}, {&lc.renew, renewSQL}, {&lc.release, releaseSQL},
		{&lc.begin, "BEGIN IMMEDIATE"}, {&lc.commit, "COMMIT"}, {&lc.rollback, "ROLLBACK"},
	} {
		err := retryBusy(ctx, func() (err error) {
			*p.stmt, err = lc.conn.PrepareContext(ctx, p.sql)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (lc *leaseConn) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{lc.acquire, lc.get, lc.renew, lc.release, lc.begin, lc.commit, lc.rollback} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	errs = append(errs, lc.conn.Close())
	return errors.Join(errs...)
}

// writeTx runs fn in an IMMEDIATE transaction on the lease connection, which
// commits if fn returns nil and rolls back otherwise. BEGIN waits for the
// database's write lock (a busy error if it stays locked); COMMIT and
// ROLLBACK, which wait for nothing, run even if ctx has ended, so that no
// transaction is left open.
func (lc *leaseConn) writeTx(ctx context.Context, fn func() error) error {
	if _, err := lc.begin.ExecContext(ctx); err != nil {
		switch {
		case ctx.Err() != nil:
			// The driver reports ctx's error even for a BEGIN that ran:
			// end what may have begun (an error if nothing did).
			_, _ = lc.rollback.ExecContext(context.WithoutCancel(ctx))
		case !isBusy(err):
			// Not even a transaction left open by a failed ROLLBACK may
			// stay on the connection: have withLease replace it.
			_ = lc.conn.Raw(func(any) error { return driver.ErrBadConn })
			return fmt.Errorf("%w (the lease connection is replaced: %w)", err, driver.ErrBadConn)
		}
		return err
	}
	if err := fn(); err != nil {
		// An error if SQLite already rolled back (after an interrupt, say).
		_, _ = lc.rollback.ExecContext(context.WithoutCancel(ctx))
		return err
	}
	if _, err := lc.commit.ExecContext(context.WithoutCancel(ctx)); err != nil {
		_, _ = lc.rollback.ExecContext(context.WithoutCancel(ctx))
		return err
	}
	return nil
}

// issue runs acquire, the acquire statement, with the floor of the token it
// issues, and returns its error. The floor is clockFloor, the wall clock in
// microseconds. On Linux it is also one above the high-water mark in the
// liveness file, which outlives the database file: the statement, the
// read of the mark and its raise to the new token run in one transaction,
// so the mark is raised before the token commits, and a failed raise rolls
// the statement back. Tokens thus keep growing after the database file was
// deleted (with its own mark) even if the clock was stepped back, as long
// as the liveness file is kept.
func (s *Store) issue(ctx context.Context, lc *leaseConn, clockFloor int64, acquire func(floor int64) (token int64, err error)) error {
	if s.live == nil {
		_, err := acquire(clockFloor)
		return err
	}
	return lc.writeTx(ctx, func() error {
		return s.live.withMark(ctx, func(mark int64) (int64, error) {
			return acquire(max(clockFloor, mark+1))
		})
	})
}

// withLease runs op on the lease connection, alone, and retries it while the
// database is busy, until ctx ends. A connection that broke is replaced on
// the next call. Before and after op it checks that the path still names
// the file Open opened, so that a success means the file other processes
// see had it, and a new connection never opens another file.
func (s *Store) withLease(ctx context.Context, op func(lc *leaseConn) error) error {
	select {
	case s.leaseSem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.leaseSem }()
	if s.closed {
		return ErrClosed
	}
	if err := s.checkFile(); err != nil {
		return err
	}
	if s.lc == nil {
		var lc *leaseConn
		err := retryBusy(ctx, func() (err error) {
			lc, err = newLeaseConn(ctx, s.db)
			return err
		})
		if err != nil {
			return fmt.Errorf("reconnect: %w", err)
		}
		s.lc = lc
	}
	lc := s.lc
	err := retryBusy(ctx, func() error { return op(lc) })
	if errors.Is(err, sql.ErrConnDone) || errors.Is(err, driver.ErrBadConn) {
		_ = lc.close()
		s.lc = nil
	}
	if ferr := s.checkFile(); ferr != nil {
		return ferr
	}
	return err
}

// checkFile returns an error matching [ErrFileChanged] if the path no
// longer names the file that Open opened, or that file is empty (SQLite
// never leaves a database in WAL mode empty).
func (s *Store) checkFile() error {
	fi, err := os.Stat(s.abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w (no file is at the path now)", ErrFileChanged)
	case err != nil:
		return fmt.Errorf("check the database file: %w", err)
	case !os.SameFile(fi, s.file):
		return fmt.Errorf("%w (the path now names another file)", ErrFileChanged)
	case fi.Size() == 0:
		return fmt.Errorf("%w (the file is now empty)", ErrFileChanged)
	}
	return nil
}

// TryAcquire implements [elector.Store]. name and holder must be valid
// ([elector.ValidateName], [elector.ValidateHolder]) and ttl within
// [elector.ValidateTTL]. The store keeps ttl rounded up to whole
// milliseconds, and never issues a token below the wall clock in
// microseconds, nor on Linux below the largest token ever issued through
// the file's liveness file, so that tokens keep growing even after the
// file was deleted or restored from an older copy (see the package
// documentation).
//
// On Linux, a lease held by another Store whose liveness lock is gone (its
// process died, see the package documentation) is taken over at once, with
// a compare-and-set on the version just read, whatever the caller observed.
func (s *Store) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	if err := checkArgs(name, ttl); err != nil {
		return elector.Lease{}, err
	}
	if err := elector.ValidateHolder(holder); err != nil {
		return elector.Lease{}, err
	}
	ttlMs := millisUp(ttl)
	liveFile, liveOffset := s.live.args()
	var (
		l       elector.Lease
		waitFor holderID // the live holder of a held lease
	)
	err := s.withLease(ctx, func(lc *leaseConn) error {
		try := observed
		for {
			wall := clock.Wall()
			var token, version int64
			err := s.issue(ctx, lc, wall.UnixMicro(), func(floor int64) (int64, error) {
				rows, err := lc.acquire.QueryContext(ctx, name, holder, ttlMs, sqlInt(try.Token), sqlInt(try.Version),
					floor, wall.UnixMilli(), liveFile, liveOffset)
				err = scanOne(rows, err, &token, &version)
				return token, err
			})
			s.noteRecorded(err)
			if err == nil {
				l = elector.Lease{Name: name, Holder: holder, Token: uint64(token), Version: uint64(version),
					TTL: fromMillis(ttlMs), Written: time.UnixMilli(wall.UnixMilli())}
				return nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			// Another term holds the lease.
			cur, id, err := lc.current(ctx, name)
			switch {
			case err == nil && s.live.gone(id):
				// No process of its holder is left to run the job: take
				// this very version over.
				try = cur
			case err == nil:
				waitFor = id
				return &elector.HeldError{Lease: cur}
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
			// It changed in between: try again.
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	})
	s.watch.track(name, waitFor)
	if err != nil {
		return elector.Lease{}, s.opError("acquire", name, err)
	}
	return l, nil
}

// noteRecorded notes the result of an acquire or renew statement: unless it
// matched no row, it may have recorded this Store's liveness in a row.
func (s *Store) noteRecorded(err error) {
	if s.live != nil && !errors.Is(err, sql.ErrNoRows) {
		s.recorded.Store(true)
	}
}

// current reads the current, unreleased term of name and its holder's
// liveness record, or returns sql.ErrNoRows.
func (lc *leaseConn) current(ctx context.Context, name string) (elector.Lease, holderID, error) {
	var token, version, ttlMs, written int64
	var liveFile sql.NullString
	var liveOffset sql.NullInt64
	l := elector.Lease{Name: name}
	if err := lc.get.QueryRowContext(ctx, name).Scan(&l.Holder, &token, &version, &ttlMs, &written, &liveFile, &liveOffset); err != nil {
		return elector.Lease{}, holderID{}, err
	}
	l.Token, l.Version, l.TTL, l.Written = uint64(token), uint64(version), fromMillis(ttlMs), time.UnixMilli(written)
	return l, scanLive(liveFile, liveOffset), nil
}

// Renew implements [elector.Store]. Like TryAcquire, it keeps ttl rounded up
// to whole milliseconds. Its error matches [elector.ErrLeaseLost] if l is no
// longer the current term, and also if the file changed under the store
// ([ErrFileChanged]).
func (s *Store) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	if err := checkArgs(l.Name, ttl); err != nil {
		return elector.Lease{}, err
	}
	ttlMs := millisUp(ttl)
	written := clock.Wall().UnixMilli()
	liveFile, liveOffset := s.live.args()
	var version int64
	err := s.withLease(ctx, func(lc *leaseConn) error {
		rows, err := lc.renew.QueryContext(ctx, l.Name, l.Holder, sqlInt(l.Token), ttlMs, written, liveFile, liveOffset)
		err = scanOne(rows, err, &version)
		s.noteRecorded(err)
		return err
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return elector.Lease{}, fmt.Errorf("sqlitelease: renew lease %q token %d of %q: %w", l.Name, l.Token, l.Holder, elector.ErrLeaseLost)
	case errors.Is(err, ErrFileChanged):
		return elector.Lease{}, fmt.Errorf("sqlitelease: renew lease %q token %d in %q: %w: %w", l.Name, l.Token, s.path, err, elector.ErrLeaseLost)
	case err != nil:
		return elector.Lease{}, s.opError("renew", l.Name, err)
	}
	l.Version, l.TTL, l.Written = uint64(version), fromMillis(ttlMs), time.UnixMilli(written)
	return l, nil
}

// Release implements [elector.Store]. It also wakes the candidates that
// watch the lease through this Store.
func (s *Store) Release(ctx context.Context, l elector.Lease) error {
	if err := elector.ValidateName(l.Name); err != nil {
		return err
	}
	var n int64
	err := s.withLease(ctx, func(lc *leaseConn) error {
		res, err := lc.release.ExecContext(ctx, l.Name, l.Holder, sqlInt(l.Token), clock.Wall().UnixMilli())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return s.opError("release", l.Name, err)
	}
	if n > 0 {
		s.watch.notify(l.Name)
	}
	return nil
}

// Get implements [elector.Store].
func (s *Store) Get(ctx context.Context, name string) (elector.Lease, error) {
	if err := elector.ValidateName(name); err != nil {
		return elector.Lease{}, err
	}
	var l elector.Lease
	err := s.withLease(ctx, func(lc *leaseConn) (err error) {
		l, _, err = lc.current(ctx, name)
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return elector.Lease{}, fmt.Errorf("sqlitelease: lease %q: %w", name, elector.ErrNoLease)
	}
	if err != nil {
		return elector.Lease{}, s.opError("get", name, err)
	}
	return l, nil
}

// opError wraps the error of a lease operation with the operation, the
// lease and the file. Errors the caller branches on (HeldError, ErrClosed,
// context errors) pass through errors.Is and errors.As.
func (s *Store) opError(op, name string, err error) error {
	var held *elector.HeldError
	if errors.As(err, &held) || errors.Is(err, ErrClosed) {
		return err
	}
	return fmt.Errorf("sqlitelease: %s lease %q in %q: %w", op, name, s.path, err)
}

// scanOne scans the first row of rows, the result of a write statement with
// RETURNING, into dest, or returns sql.ErrNoRows if there is none. Unlike
// QueryRow, it steps the statement to completion. That matters: SQLite runs
// its WAL auto-checkpoint only when an autocommit statement commits in a
// step, not when it commits in the reset that closing unfinished rows does,
// so with QueryRow the WAL would grow without bound under lease traffic
// alone (and a later checkpoint of it would stall a renewal).
func scanOne(rows *sql.Rows, err error, dest ...any) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	for rows.Next() { // step to SQLITE_DONE: the statement commits here
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return rows.Close()
}

// checkArgs validates a lease name and TTL.
func checkArgs(name string, ttl time.Duration) error {
	if err := elector.ValidateName(name); err != nil {
		return err
	}
	return elector.ValidateTTL(ttl)
}

// DB returns the store's database handle, for a job's own schema setup and
// reads in the same file. Writes that must happen only while the caller
// leads belong in [Store.Fenced]. The store keeps up to two connections of
// this pool for itself while it is open (lease traffic and, while candidates
// wait, release watching); leave room for them if you limit
// SetMaxOpenConns. Do not Close the handle; [Store.Close] does.
func (s *Store) DB() *sql.DB { return s.db }

// Path returns the path of the database file as given to [Open].
func (s *Store) Path() string { return s.path }

// Close stops the store's goroutines, closes its connections and the
// database handle. Later calls return the result of the first. Operations
// after Close return [ErrClosed].
//
// On Linux, Close first clears the liveness record of every lease this
// Store still holds (its terms may still be running: candidates then wait
// the elapsed-time rule for them), and only then drops its liveness lock.
// If it cannot clear them, it returns an error and keeps the lock until the
// process exits.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.isClosed.Store(true)
		s.watch.close()
		s.leaseSem <- struct{}{} // waits for the operation in flight
		s.closed = true
		lc := s.lc
		s.lc = nil
		<-s.leaseSem
		var errs []error
		clearErr := s.clearLive(lc)
		if lc != nil {
			errs = append(errs, lc.close())
		}
		errs = append(errs, s.db.Close())
		if clearErr != nil {
			errs = append(errs, clearErr) // and the lock stays: the leases' jobs may still run
		} else {
			errs = append(errs, s.live.close())
		}
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("sqlitelease: close %q: %w", s.path, err)
		}
	})
	return s.closeErr
}
