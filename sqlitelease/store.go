package sqlitelease

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/fanout"
	"github.com/leaderaware/leaderaware/internal/sqlitesql"
)

// ErrClosed is returned by the methods of a [Store] after [Store.Close].
var ErrClosed = errors.New("sqlitelease: store is closed")

// Store is an [elector.Store] on one SQLite file, for candidates on one host,
// with fenced writes for the jobs that keep their data in the file. Open one
// Store per file per process, share it, and Close it when done.
type Store struct {
	clockCarrier // the clock of its token floors and its electors

	path  string                      // as given to Open, for error messages
	abs   string                      // the absolute path
	real  string                      // abs with its symbolic links resolved: where SQLite and the side files are
	hold  atomic.Pointer[fileHold]    // on the database file, from Open (or reopen) to Close
	file  atomic.Pointer[os.FileInfo] // the database file as Open found it, or as reopen did
	sides [2]os.FileInfo              // its -wal and -shm files (see reopen)
	// opened is when Open began; fileOK, when (time since opened) a check
	// of file last passed, 0 after one that failed (see checkFileRead).
	opened time.Time
	fileOK atomic.Int64
	cfg    config
	// db is the pool of the file the Store works on (see DB); left, the
	// pools and holds of the files it left, open until Close (see reopen.go).
	db   atomic.Pointer[sql.DB]
	left []leftFile
	// issued is the largest token the Store issued; ended, the largest
	// token of a term that ended when the Store reopened its path.
	issued, ended atomic.Int64
	live          *sidecar // the liveness lock; nil outside Linux
	// recorded is set once a statement may have recorded live in a lease
	// row: Close has rows to clear only after that.
	recorded atomic.Bool

	// leaseSem (capacity 1) serializes lease operations on lc; waiting for
	// it respects the caller's context. It guards lc and closed.
	leaseSem chan struct{}
	lc       *leaseConn // nil after Close, or after the connection broke
	closed   bool

	changes    *fanout.Source // Notify's callers, this Store's own changes and the wake source
	warnedWake sync.Once      // the wake source says once that it cannot use inotify

	isClosed  atomic.Bool // set when Close starts
	closeOnce sync.Once
	closeErr  error
}

// Compile-time checks of the interfaces a Store promises.
var (
	_ elector.Store        = (*Store)(nil)
	_ elector.BulkReader   = (*Store)(nil)
	_ elector.Notifier     = (*Store)(nil)
	_ elector.BatchRenewer = (*Store)(nil)
)

// ErrFileChanged is returned by the operations of a [Store] whose database
// file was deleted, replaced or emptied since [Open]; the terms on the old
// file end (a Renew's error also matches [elector.ErrLeaseLost]). Writes
// check the file first, reads within 100 ms. When another file is moved over
// it (a restore: move it in and remove the old -wal and -shm in the same
// step), the Store opens it and goes on, its leases taken over one TTL later;
// until then operations and [Store.Healthy] return this error.
var ErrFileChanged = errors.New("the database file was deleted, replaced or truncated since Open; close the store and open the path again")

// leaseConn is the connection of the lease operations, out of the pool so
// that renewals never queue behind job work, with its prepared statements.
type leaseConn struct {
	conn                                  *sql.Conn
	acquire, getMany, renewBatch, release *sql.Stmt
	getOne, renewOne                      *sql.Stmt // getMany and renewBatch of one: no JSON to build and parse
	begin, commit, rollback               *sql.Stmt // of the transaction of Store.issue
	fileHigh, placeholder                 *sql.Stmt // of restoreFile
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
		{&lc.acquire, sqlitesql.Acquire}, {&lc.getMany, getManySQL},
		{&lc.renewBatch, sqlitesql.RenewBatch}, {&lc.release, sqlitesql.Release},
		{&lc.getOne, sqlitesql.GetLive}, {&lc.renewOne, sqlitesql.Renew},
		{&lc.begin, "BEGIN IMMEDIATE"}, {&lc.commit, "COMMIT"}, {&lc.rollback, "ROLLBACK"},
		{&lc.fileHigh, fileHighSQL}, {&lc.placeholder, placeholderSQL},
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
	for _, st := range []*sql.Stmt{lc.acquire, lc.getMany, lc.renewBatch, lc.release, lc.getOne, lc.renewOne, lc.begin, lc.commit, lc.rollback, lc.fileHigh, lc.placeholder} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	errs = append(errs, lc.conn.Close())
	return errors.Join(errs...)
}

// writeTx runs fn in an IMMEDIATE transaction on lc. COMMIT and ROLLBACK
// run even if ctx has ended, so that no transaction is left open.
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

// issue runs acquire with the floor of the token it issues: the wall clock
// in µs (clockFloor) and on Linux one above the mark in <db>-live, read and
// raised in the statement's transaction. A file whose own mark is below that
// mark was restored (see reopen.go): issue then marks its leases held, or
// gives name a placeholder row, and returns sql.ErrNoRows, to read again.
func (s *Store) issue(ctx context.Context, lc *leaseConn, name string, ttlMs, clockFloor int64, acquire func(floor int64) (token int64, err error)) error {
	if s.live == nil {
		_, err := acquire(clockFloor)
		return err
	}
	restored := false
	err := lc.writeTx(ctx, func() error {
		return s.live.withMark(ctx, func(mark int64) (_ int64, err error) {
			if restored, err = restoreFile(ctx, lc, mark, s.live.othersLocked, name, ttlMs, s.Clock().Wall().UnixMilli()); err != nil || restored {
				return mark, err
			}
			return acquire(max(clockFloor, mark+1))
		})
	})
	if err == nil && restored {
		return sql.ErrNoRows
	}
	return err
}

// withLease runs op on the lease connection, alone, retrying while the
// database is busy, after a check that the path still names the Store's file
// (following it to a restored one); a broken connection is replaced.
func (s *Store) withLease(ctx context.Context, op func(lc *leaseConn) error) error {
	return s.onLeaseConn(ctx, s.checkFile, op)
}

// withLeaseRead is withLease for a read, served by a check of the file that
// passed within readRecheck.
func (s *Store) withLeaseRead(ctx context.Context, op func(lc *leaseConn) error) error {
	return s.onLeaseConn(ctx, s.checkFileRead, op)
}

func (s *Store) onLeaseConn(ctx context.Context, check func() error, op func(lc *leaseConn) error) error {
	select {
	case s.leaseSem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.leaseSem }()
	if s.closed {
		return ErrClosed
	}
	if s.lc == nil {
		check = s.checkFile // the new connection must open the file Open opened
	}
	if err := check(); err != nil {
		if !errors.Is(err, ErrFileChanged) {
			return err
		}
		if err := s.reopen(ctx, err); err != nil {
			return err
		}
	}
	if s.lc == nil {
		var lc *leaseConn
		err := retryBusy(ctx, func() (err error) {
			lc, err = newLeaseConn(ctx, s.DB())
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
	return err
}

// readRecheck is how long a passing check of the file serves reads: a stale
// read can only make a candidate wait. Tests change it.
var readRecheck = 100 * time.Millisecond

// checkFile returns an error matching [ErrFileChanged] if the path no longer
// names the Store's file, or it is empty, and records when a check passed.
func (s *Store) checkFile() error {
	err := s.statFile()
	if err != nil {
		s.fileOK.Store(0)
	} else {
		s.fileOK.Store(int64(max(time.Since(s.opened), 1)))
	}
	return err
}

func (s *Store) checkFileRead() error {
	if ok := s.fileOK.Load(); ok > 0 && time.Since(s.opened)-time.Duration(ok) < readRecheck {
		return nil
	}
	return s.checkFile()
}

// fileInfo returns the database file the Store works on.
func (s *Store) fileInfo() os.FileInfo { return *s.file.Load() }

func (s *Store) statFile() error {
	fi, err := os.Stat(s.abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w (no file is at the path now)", ErrFileChanged)
	case err != nil:
		return fmt.Errorf("check the database file: %w", err)
	case !os.SameFile(fi, s.fileInfo()):
		return fmt.Errorf("%w (the path now names another file)", ErrFileChanged)
	case !s.hold.Load().inPlace(s.real):
		return fmt.Errorf("%w (the file is now in another directory than its -wal and -shm files)", ErrFileChanged)
	case fi.Size() == 0:
		return fmt.Errorf("%w (the file is now empty)", ErrFileChanged)
	case links(fi) > 1:
		return linksError(s.real, links(fi))
	}
	return nil
}

// TryAcquire implements [elector.Store], keeping ttl rounded up to whole
// milliseconds. On Linux a lease of a holder whose liveness lock is gone is
// taken over at once, with a compare-and-set on the version just read.
func (s *Store) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	if err := checkArgs(name, ttl); err != nil {
		return elector.Lease{}, err
	}
	if err := elector.ValidateHolder(holder); err != nil {
		return elector.Lease{}, err
	}
	ttlMs := millisUp(ttl)
	liveFile, liveOffset := s.live.args()
	var l elector.Lease
	// A call that observed no term can win only a free lease or a dead
	// holder's: a plain read comes first, without the write lock. Either
	// way the compare-and-set alone decides who wins.
	read := observed.Token == 0
	with, checked := s.withLease, true
	if read {
		with, checked = s.withLeaseRead, false
	}
	op := func(lc *leaseConn) error {
		try := observed
		for {
			if read {
				got, ids, err := lc.leases(ctx, []string{name})
				if err != nil {
					return err
				}
				cur, id := got[0], ids[0]
				switch {
				case cur.Token == 0:
					// Free.
				case cur.Token == try.Token && cur.Version == try.Version:
					// Still the observed term.
				case s.live.gone(id):
					// No process of its holder is left to run the job:
					// take this very version over.
					try = cur
				default:
					return &elector.HeldError{Lease: cur}
				}
			}
			if !checked { // a write: see withLease
				if err := s.checkFile(); errors.Is(err, ErrFileChanged) {
					return errRecheck
				} else if err != nil {
					return err
				}
				checked = true
			}
			wall := s.Clock().Wall()
			s.markRecorded()
			var token, version int64
			err := s.issue(ctx, lc, name, ttlMs, wall.UnixMicro(), func(floor int64) (int64, error) {
				rows, err := lc.acquire.QueryContext(ctx, name, holder, ttlMs, sqlInt(try.Token), sqlInt(try.Version),
					floor, wall.UnixMilli(), liveFile, liveOffset)
				err = scanOne(rows, err, &token, &version)
				return token, err
			})
			if err == nil {
				s.issued.Store(max(s.issued.Load(), token)) // under leaseSem
				l = elector.Lease{Name: name, Holder: holder, Token: uint64(token), Version: uint64(version),
					TTL: fromMillis(ttlMs), Written: time.UnixMilli(wall.UnixMilli())}
				return nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			// Another term holds the lease, or it changed since the read:
			// read again.
			if err := ctx.Err(); err != nil {
				return err
			}
			read = true
		}
	}
	err := with(ctx, op)
	if errors.Is(err, errRecheck) {
		// The file changed since the check that served the read: again,
		// with a check that follows the path to a new file (see withLease).
		read = observed.Token == 0
		err = s.withLease(ctx, op)
	}
	if err != nil {
		return elector.Lease{}, s.opError("acquire", name, err)
	}
	s.live.touch() // a term began: wake the other Stores' watchers
	s.changes.Send(elector.Change{Name: name})
	return l, nil
}

var errRecheck = errors.New("the file changed since it was checked")

// markRecorded notes, before an acquire or renew statement, that it may
// record this Store's liveness in a row: Close has rows to clear after that.
func (s *Store) markRecorded() {
	if s.live != nil {
		s.recorded.Store(true)
	}
}

// Renew implements [elector.Store]. Like TryAcquire, it keeps ttl rounded up
// to whole milliseconds. Its error matches [elector.ErrLeaseLost] if l is no
// longer the current term, and also if the file changed under the store
// ([ErrFileChanged]).
func (s *Store) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	l.TTL = ttl
	got, err := s.RenewMany(ctx, []elector.Lease{l})
	switch {
	case errors.Is(err, ErrFileChanged), errors.Is(err, ErrSecondPath):
		return elector.Lease{}, fmt.Errorf("%w: %w", err, elector.ErrLeaseLost)
	case err != nil:
		return elector.Lease{}, err
	case got[0].Token != 0:
		return got[0], nil
	case s.endedTerm(l.Token):
		return elector.Lease{}, fmt.Errorf("sqlitelease: renew lease %q token %d in %q: %w: %w", l.Name, l.Token, s.path, errTermEnded, elector.ErrLeaseLost)
	}
	return elector.Lease{}, fmt.Errorf("sqlitelease: renew lease %q token %d of %q: %w", l.Name, l.Token, l.Holder, elector.ErrLeaseLost)
}

// RenewMany implements [elector.BatchRenewer], with the checks of Renew, in
// one statement; a term that ended when the Store followed its path to a
// new file (see [ErrFileChanged]) is no longer current.
func (s *Store) RenewMany(ctx context.Context, terms []elector.Lease) ([]elector.Lease, error) {
	for _, l := range terms {
		if err := checkArgs(l.Name, l.TTL); err != nil {
			return nil, err
		}
		if err := elector.ValidateHolder(l.Holder); err != nil {
			return nil, err
		}
	}
	out := make([]elector.Lease, len(terms))
	if len(terms) == 0 {
		return out, nil
	}
	written := s.Clock().Wall().UnixMilli()
	liveFile, liveOffset := s.live.args()
	renewed := func(i int, version int64) {
		l := terms[i]
		l.Version, l.TTL, l.Written = uint64(version), fromMillis(millisUp(l.TTL)), time.UnixMilli(written)
		out[i] = l
	}
	err := s.withLease(ctx, func(lc *leaseConn) error {
		clear(out)
		var current []int // the terms not ended by a reopen
		for i, l := range terms {
			if !s.endedTerm(l.Token) {
				current = append(current, i)
			}
		}
		if len(current) == 0 {
			return nil
		}
		s.markRecorded()
		if len(current) == 1 {
			l, version := terms[current[0]], int64(0)
			rows, err := lc.renewOne.QueryContext(ctx, l.Name, l.Holder, sqlInt(l.Token), millisUp(l.TTL), written, liveFile, liveOffset)
			if err = scanOne(rows, err, &version); err == nil {
				renewed(current[0], version)
			} else if errors.Is(err, sql.ErrNoRows) {
				return nil // no longer current
			}
			return err
		}
		rows, err := lc.renewBatch.QueryContext(ctx, renewBatchArg(terms, current), written, liveFile, liveOffset)
		if err != nil {
			return err
		}
		defer rows.Close()
		versions := make(map[rowKey]int64, len(current))
		for rows.Next() {
			var k rowKey
			var version int64
			if err := rows.Scan(&k.name, &k.holder, &k.token, &version); err != nil {
				return err
			}
			versions[k] = version
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, i := range current {
			if v, ok := versions[rowKey{terms[i].Name, terms[i].Holder, sqlInt(terms[i].Token)}]; ok {
				renewed(i, v)
			}
		}
		return rows.Close() // the statement commits here
	})
	if err != nil {
		return nil, s.opError("renew", terms[0].Name, err)
	}
	return out, nil
}

// rowKey names a term in the result of RenewBatch.
type rowKey struct {
	name, holder string
	token        int64
}

// renewBatchArg returns the JSON array of terms[i] for i in current that
// RenewBatch reads.
func renewBatchArg(terms []elector.Lease, current []int) string {
	type term struct {
		N   string `json:"n"`
		H   string `json:"h"`
		T   int64  `json:"t"`
		TTL int64  `json:"ttl"`
	}
	arg := make([]term, len(current))
	for j, i := range current {
		l := terms[i]
		arg[j] = term{l.Name, l.Holder, sqlInt(l.Token), millisUp(l.TTL)}
	}
	b, _ := json.Marshal(arg) // strings and integers always encode
	return string(b)
}

// Release implements [elector.Store].
func (s *Store) Release(ctx context.Context, l elector.Lease) error {
	if err := elector.ValidateName(l.Name); err != nil {
		return err
	}
	var n int64
	err := s.withLease(ctx, func(lc *leaseConn) error {
		if s.endedTerm(l.Token) {
			return nil // not the current term of the file at the path: nothing to release
		}
		res, err := lc.release.ExecContext(ctx, l.Name, l.Holder, sqlInt(l.Token), s.Clock().Wall().UnixMilli())
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
		s.live.touch()
		s.changes.Send(elector.Change{Name: l.Name})
	}
	return nil
}

// Get implements [elector.Store].
func (s *Store) Get(ctx context.Context, name string) (elector.Lease, error) {
	if err := elector.ValidateName(name); err != nil {
		return elector.Lease{}, err
	}
	var l elector.Lease
	err := s.withLeaseRead(ctx, func(lc *leaseConn) error {
		got, _, err := lc.leases(ctx, []string{name})
		if err == nil {
			l = got[0]
		}
		return err
	})
	if err != nil {
		return elector.Lease{}, s.opError("get", name, err)
	}
	if l.Token == 0 {
		return elector.Lease{}, fmt.Errorf("sqlitelease: lease %q: %w", name, elector.ErrNoLease)
	}
	return l, nil
}

// getManySQL reads the current, unreleased terms of the names in the JSON
// array ?1 as GetLive does, each with its index in the array.
const getManySQL = `SELECT j.key, l.holder, l.token, l.version, l.ttl_ms, l.written_at,
	CASE WHEN l.live_version = l.version THEN l.live_file END,
	CASE WHEN l.live_version = l.version THEN l.live_offset END
FROM json_each(?1) AS j JOIN ` + leaseTable + ` AS l ON l.name = j.value
WHERE NOT l.released`

// GetMany implements [elector.BulkReader], in one statement. On Linux a
// lease whose holder's liveness lock is gone (see Process death in the
// package documentation) is reported free: TryAcquire takes it over at once.
func (s *Store) GetMany(ctx context.Context, names []string) ([]elector.Lease, error) {
	for _, name := range names {
		if err := elector.ValidateName(name); err != nil {
			return nil, err
		}
	}
	if len(names) == 0 {
		return []elector.Lease{}, nil
	}
	var out []elector.Lease
	var ids []holderID
	err := s.withLeaseRead(ctx, func(lc *leaseConn) (err error) {
		out, ids, err = lc.leases(ctx, names)
		return err
	})
	if err != nil {
		return nil, s.opError("get", names[0], err)
	}
	gone := make(map[holderID]bool)
	for i, id := range ids {
		dead, tested := gone[id]
		if !tested {
			dead = s.live.gone(id)
			gone[id] = dead
		}
		if dead {
			out[i] = elector.Lease{Name: names[i]}
		}
	}
	return out, nil
}

// leases reads the leases names (the zero Lease but for Name if free), and
// their holders' liveness records.
func (lc *leaseConn) leases(ctx context.Context, names []string) ([]elector.Lease, []holderID, error) {
	var rows *sql.Rows
	var err error
	if len(names) == 1 {
		rows, err = lc.getOne.QueryContext(ctx, names[0])
	} else {
		arg, _ := json.Marshal(names)                         // strings always encode
		rows, err = lc.getMany.QueryContext(ctx, string(arg)) // text: a blob would be JSONB
	}
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	out, ids := make([]elector.Lease, len(names)), make([]holderID, len(names))
	for i, name := range names {
		out[i].Name = name
	}
	for rows.Next() {
		var (
			i                            int
			l                            elector.Lease
			token, version, ttl, written int64
			liveFile                     sql.NullString
			liveOffset                   sql.NullInt64
		)
		dest := []any{&i, &l.Holder, &token, &version, &ttl, &written, &liveFile, &liveOffset}
		if len(names) == 1 {
			dest = dest[1:] // GetLive has no index column
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, nil, err
		}
		l.Name, l.Token, l.Version, l.TTL, l.Written = names[i], uint64(token), uint64(version), fromMillis(ttl), time.UnixMilli(written)
		out[i], ids[i] = l, scanLive(liveFile, liveOffset)
	}
	return out, ids, rows.Err()
}

// opError names the operation, lease and file, but passes HeldError and
// ErrClosed as they are.
func (s *Store) opError(op, name string, err error) error {
	var held *elector.HeldError
	if errors.As(err, &held) || errors.Is(err, ErrClosed) {
		return err
	}
	return fmt.Errorf("sqlitelease: %s lease %q in %q: %w", op, name, s.path, err)
}

// scanOne scans the one row of a write statement with RETURNING into dest
// (sql.ErrNoRows if none), stepping the statement to completion: SQLite
// checkpoints the WAL only when a statement commits in a step, so with
// QueryRow the WAL would grow without bound.
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

// DB returns the handle of the store's file, for the job's own tables; writes
// that must happen only while leading belong in [Store.Fenced]. The store
// keeps one connection of the pool for itself. Do not Close it. After a
// restore (see [ErrFileChanged]) it returns the new file's handle.
func (s *Store) DB() *sql.DB { return s.db.Load() }

// Path returns the path of the database file as given to [Open].
func (s *Store) Path() string { return s.path }

// Close closes the store's connections and handles; later calls return the
// first one's result, and operations [ErrClosed]. On Linux it first clears
// the liveness records of the leases it still holds (candidates then wait
// one TTL), then drops its liveness lock, which it keeps if that failed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.isClosed.Store(true)
		s.changes.Close()
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
		for _, f := range append(s.left, leftFile{s.DB(), s.hold.Load()}) {
			errs = append(errs, f.db.Close())
			// After SQLite's connections, and the ones a job still has: see identity_linux.go.
			f.hold.releaseWhen(func() bool { return f.db.Stats().OpenConnections == 0 })
		}
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
