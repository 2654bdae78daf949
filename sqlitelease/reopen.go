package sqlitelease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// A restore (`mv restored.db app.db`) is safe because every term the Store
// issued on the old file ends (ended: Renew, Release and fenced writes
// refuse tokens up to it), and no Store takes a lease of the restored file
// at once: its rows are marked held without liveness record (restoreSQL),
// by the Store that reopens and, on Linux, by the first acquire of any
// Store that finds the file's mark below the mark in <db>-live while other
// Stores run; a lease without a row gets a placeholder (placeholderSQL).
// reopen refuses the new file while the old one's -wal and -shm are there.

// restoredKey is the key in leaderaware_meta of the high-water mark that a
// replaced file's rows were marked held at (see restoreSQL).
const restoredKey = "restored_below"

// restoreSQL marks every lease row of a restored file held by its last
// holder, without liveness record, with a TTL of at least ?1 ms (?2 is
// written_at); restoredSQL raises the high-water mark to ?1 and records it.
const (
	restoreSQL = `UPDATE ` + leaseTable + ` SET released = 0, version = max(version + 1, ?2 * 1000), ttl_ms = max(ttl_ms, ?1),
	written_at = ?2, live_file = NULL, live_offset = NULL, live_version = NULL`
	restoredSQL = `INSERT INTO ` + metaTable + ` (key, value) VALUES ('` + highWaterKey + `', ?1), ('` + restoredKey + `', ?1)
ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)`
)

// placeholderSQL gives the lease ?1 of a restored file that has no row one
// held by nobody known, with the token of the restore: a term of it on the
// old file may still run. ?2 is the TTL in ms, ?3 written_at.
const placeholderSQL = `INSERT INTO ` + leaseTable + ` (name, holder, token, version, ttl_ms, released, written_at)
SELECT ?1, '(restored file)', value, max(1, ?3 * 1000), ?2, 0, ?3 FROM ` + metaTable + ` WHERE key = '` + restoredKey + `' AND value > 0
ON CONFLICT (name) DO NOTHING`

// longestTTLSQL reads the longest TTL of the file's leases, in ms.
const longestTTLSQL = `SELECT coalesce(max(ttl_ms), 1) FROM ` + leaseTable

// fileHighSQL reads the file's high-water mark and the mark it was restored
// below (0 if it never was: placeholderSQL then inserts nothing).
const fileHighSQL = `SELECT coalesce((SELECT value FROM ` + metaTable + ` WHERE key = '` + highWaterKey + `'), 0),
	coalesce((SELECT value FROM ` + metaTable + ` WHERE key = '` + restoredKey + `'), 0)`

// restoreFile marks the rows of the file on lc held if its mark is below
// floor and others says that another Store may run a term of the old file,
// and gives name, if not "", a placeholder row; it reports whether it wrote.
// The caller holds the write lock; now is the wall clock in ms.
func restoreFile(ctx context.Context, lc *leaseConn, floor int64, others func() bool, name string, ttlMs, now int64) (bool, error) {
	var high, below int64
	if err := lc.fileHigh.QueryRowContext(ctx).Scan(&high, &below); err != nil {
		return false, err
	}
	marked := high < floor && others()
	if marked {
		for _, q := range []struct {
			sql  string
			args []any
		}{{restoreSQL, []any{ttlMs, now}}, {restoredSQL, []any{floor}}} {
			if _, err := lc.conn.ExecContext(ctx, q.sql, q.args...); err != nil {
				return false, fmt.Errorf("mark the leases of the restored file held: %w", err)
			}
		}
	}
	if name == "" || (below <= 0 && !marked) {
		return marked, nil
	}
	res, err := lc.placeholder.ExecContext(ctx, name, ttlMs, now)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return marked || n > 0, err
}

// reopen opens the path again after check found another file there
// (changed), ending the Store's terms on the old file and marking the new
// file's leases held; it returns changed while the path names no usable file.
func (s *Store) reopen(ctx context.Context, changed error) error {
	fi, err := os.Stat(s.abs)
	if err != nil || fi.Size() == 0 || os.SameFile(fi, s.fileInfo()) {
		return changed
	}
	if real, err := resolvePath(s.path, s.abs); err != nil || real != s.real {
		return changed // a link now leads elsewhere: that is another file, not a restore
	}
	s.ended.Store(s.issued.Load())
	if err := s.sideFilesGone(); err != nil {
		return fmt.Errorf("%w; %w", changed, err)
	}
	// The old file's mark and longest TTL: a term on it may run that long.
	var floor, ttlMs int64 = 0, 1
	if s.lc != nil {
		_ = s.lc.conn.QueryRowContext(ctx, fileMarkSQL).Scan(&floor)
		_ = s.lc.conn.QueryRowContext(ctx, longestTTLSQL).Scan(&ttlMs)
	}
	floor = max(floor, s.issued.Load())
	hold, err := holdFile(s.path, s.real) // one path to the new file too
	if err != nil {
		return fmt.Errorf("%w; reopen the path: %w", changed, err)
	}
	db, err := sql.Open("sqlite", dsn(s.real, s.cfg))
	if err != nil {
		hold.release()
		return fmt.Errorf("%w; reopen the path: %w", changed, err)
	}
	lc, err := s.setUpOn(ctx, db, hold, fi, floor, ttlMs)
	if err != nil {
		_ = db.Close()
		hold.release()
		return fmt.Errorf("%w; reopen the path: %w", changed, err)
	}
	if s.lc != nil {
		_ = s.lc.close()
	}
	s.left = append(s.left, leftFile{s.DB(), s.hold.Load()})
	s.lc = lc
	s.db.Store(db)
	s.hold.Store(hold)
	s.file.Store(&fi)
	s.sides = sideFiles(s.real)
	s.fileOK.Store(0)
	s.changes.Send(elector.Change{}) // its leases are marked held
	s.cfg.log().Warn("sqlitelease: the database file was replaced; the store ended its terms on the old file and opened the new one",
		"path", s.abs, "ended_up_to_token", s.ended.Load())
	return nil
}

// leftFile is a file the Store left for the one that replaced it.
type leftFile struct {
	db   *sql.DB
	hold *fileHold
}

// setUpOn sets up the file fi that db opens and marks its leases held, with a
// TTL of at least ttlMs, unless its mark reaches floor.
func (s *Store) setUpOn(ctx context.Context, db *sql.DB, hold *fileHold, fi os.FileInfo, floor, ttlMs int64) (*leaseConn, error) {
	var lc *leaseConn
	err := retryBusy(ctx, func() (err error) {
		lc, _, err = trySetUp(ctx, db, s.Clock())
		return err
	})
	if err != nil {
		return nil, err
	}
	if now, err := os.Stat(s.abs); err != nil || !os.SameFile(fi, now) || !hold.is(now) {
		_ = lc.close()
		return nil, errReplaced
	}
	always := func() bool { return true } // this Store's own jobs may still run
	err = lc.writeTx(ctx, func() error {
		return s.live.withMark(ctx, func(mark int64) (int64, error) {
			_, err := restoreFile(ctx, lc, max(floor, mark), always, "", ttlMs, s.Clock().Wall().UnixMilli())
			return mark, err
		})
	})
	if err != nil {
		_ = lc.close()
		return nil, err
	}
	return lc, nil
}

// errTermEnded is the error of a term the Store issued on a file it has since
// left for a restored one; it matches ErrFileChanged.
var errTermEnded error = termEndedError{}

type termEndedError struct{}

func (termEndedError) Error() string {
	return "the term was on the database file that the path named before; the store ended it when it opened the file that replaced it"
}

func (termEndedError) Is(target error) bool { return target == ErrFileChanged }

func (s *Store) endedTerm(token uint64) bool { return sqlInt(token) <= s.ended.Load() }

// sideFiles records the -wal and -shm files that SQLite pairs with the file.
func sideFiles(abs string) [2]os.FileInfo {
	var fis [2]os.FileInfo
	for i, suffix := range []string{"-wal", "-shm"} {
		fis[i], _ = os.Stat(abs + suffix)
	}
	return fis
}

// sideFilesGone returns an error while the old file's -wal or -shm is still
// at the path: SQLite would read the old log into the new file.
func (s *Store) sideFilesGone() error {
	now := sideFiles(s.real)
	for i, old := range s.sides {
		if old != nil && now[i] != nil && os.SameFile(old, now[i]) {
			return fmt.Errorf("the write-ahead log files %q and %q of the replaced file are still there, and SQLite would read them into the new file: "+
				"remove them (a restore that moves a file in must remove them too)", s.real+"-wal", s.real+"-shm")
		}
	}
	return nil
}

const healthTimeout = 5 * time.Second

// Healthy is a health check in the shape of controller-runtime's
// healthz.Checker (r may be nil): an error matching [ErrFileChanged] or
// [ErrSecondPath] while the Store cannot work on a file at its path.
func (s *Store) Healthy(r *http.Request) error {
	if s.isClosed.Load() {
		return nil
	}
	changed := s.statFile()
	if changed == nil {
		return nil // one stat: the file at the path is the Store's
	}
	ctx := context.Background()
	if r != nil {
		ctx = r.Context()
	}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	// A lease operation that does nothing follows the path to a new file.
	err := s.withLease(ctx, func(*leaseConn) error { return nil })
	switch {
	case errors.Is(err, ErrFileChanged):
		return fmt.Errorf("sqlitelease: %q: %w", s.path, err)
	case err != nil:
		return fmt.Errorf("sqlitelease: %q: %w; following the path: %w", s.path, changed, err)
	}
	return nil
}
