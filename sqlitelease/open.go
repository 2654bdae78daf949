package sqlitelease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/leaderaware/leaderaware/internal/clock"
	"github.com/leaderaware/leaderaware/internal/fanout"
)

const openTimeout = 30 * time.Second

// testHookSetUp, if set, runs in Open after the schema is set up.
var testHookSetUp func()

// ErrNetworkFS is returned by [Open] for a file on a network filesystem
// (Linux: NFS, SMB/CIFS, FUSE, 9P, CephFS, AFS, Coda, the cluster
// filesystems), unless [AllowNetworkFS] is given.
var ErrNetworkFS = errors.New("network filesystems are refused: SQLite locking is unreliable there")

// ErrNotWAL is returned by [Open] when SQLite cannot use WAL mode on the
// file (typically for lack of shared memory on the filesystem).
var ErrNotWAL = errors.New("the database cannot use WAL journal mode")

// Open opens the lease store in the SQLite file at path, creating the file
// (mode 0600) and its tables if needed; the directory must exist. It
// refuses, with an error naming the path and the cause, a file it cannot
// use safely: unwritable, too long a path, not SQLite or corrupt, emptied
// next to its write-ahead log, on a network filesystem ([ErrNetworkFS]),
// reachable through a second path ([ErrSecondPath]), without WAL
// ([ErrNotWAL]), with a newer schema ([ErrSchemaTooNew]) or a dropped
// lease table, and on Linux a <path>-live file that is not its own. Open
// logs the file's absolute path at Info level (see [WithLogger]).
func Open(path string, opts ...Option) (*Store, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var (
		s    *Store
		from int
		err  error
	)
	for attempt := 1; ; attempt++ {
		s, from, err = openFile(path, cfg)
		if !errors.Is(err, errReplaced) {
			break
		}
		if attempt == openAttempts {
			return nil, fmt.Errorf("sqlitelease: open %q: the path named another file each of %d times SQLite opened it: "+
				"stop whatever keeps replacing it", path, openAttempts)
		}
	}
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	defer cancel()
	// The liveness lock comes last, next to a file known to be a lease
	// store, and before any lease is written.
	if s.live, err = openSidecar(s.real); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("sqlitelease: open %q: %w", path, err)
	}
	if err := s.seedMark(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("sqlitelease: open %q: %w", path, err)
	}
	attrs := []any{"path", s.abs}
	if s.real != s.abs {
		attrs = append(attrs, "resolved", s.real)
	}
	if from < SchemaVersion {
		attrs = append(attrs, "schema_version", SchemaVersion, "migrated_from", from)
	}
	cfg.log().Info("sqlitelease: opened the lease store", attrs...)
	return s, nil
}

const openAttempts = 3

// errReplaced says that the path named another file once SQLite had opened
// it (openFile closed what it opened); Open tries openAttempts times.
var errReplaced = errors.New("the file was replaced while it was opened")

// openFile opens the file at path and sets it up, checking after that the
// path still names the file it recorded before: connections on a file
// replaced meanwhile would lead alone on a file nobody else sees.
func openFile(path string, cfg config) (*Store, int, error) {
	abs, real, hold, err := preparePath(path, cfg)
	if err != nil {
		return nil, 0, err
	}
	db, err := sql.Open("sqlite", dsn(real, cfg))
	if err != nil {
		hold.release()
		return nil, 0, fmt.Errorf("sqlitelease: open %q: %w", path, err)
	}
	s := &Store{clockCarrier: clock.Carry(cfg.clock), path: path, abs: abs, real: real, opened: time.Now(), cfg: cfg, leaseSem: make(chan struct{}, 1)}
	s.changes = fanout.Prepared(s.wake)
	s.db.Store(db)
	s.hold.Store(hold)
	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	defer cancel()
	file, err := os.Stat(abs)
	s.file.Store(&file)
	var from int
	if err == nil {
		from, err = s.setUp(ctx)
		s.sides = sideFiles(real)
	}
	if err == nil && testHookSetUp != nil {
		testHookSetUp()
	}
	var now os.FileInfo
	if err == nil {
		now, err = os.Stat(abs)
	}
	if err == nil && (!os.SameFile(file, now) || !hold.is(now)) {
		err = errReplaced
	}
	if errors.Is(err, fs.ErrNotExist) {
		err = errReplaced // deleted since preparePath created it
	}
	if err != nil {
		_ = s.Close()
		if errors.Is(err, errReplaced) {
			return nil, 0, err
		}
		return nil, 0, openError(path, err)
	}
	return s, from, nil
}

func dsn(real string, cfg config) string {
	return real + "?_pragma=busy_timeout(" + fmt.Sprint(busyMillis(cfg.busyTimeout)) + ")" +
		"&_pragma=journal_mode(WAL)" +
		"&_pragma=synchronous(NORMAL)" +
		"&_txlock=immediate"
}

// preparePath checks path and holds the file, and returns the absolute path
// and the one with its symbolic links resolved, where SQLite and the side
// files are.
func preparePath(path string, cfg config) (abs, real string, hold *fileHold, err error) {
	if path == "" {
		return "", "", nil, errors.New("sqlitelease: the database path is empty")
	}
	if abs, err = absPath(path); err != nil {
		return "", "", nil, fmt.Errorf("sqlitelease: open %q: %w", path, err)
	}
	if real, err = resolvePath(path, abs); err != nil {
		return "", "", nil, err
	}
	if err := checkResolved(path, abs, real); err != nil {
		return "", "", nil, err
	}
	for _, p := range []string{path, real} {
		if strings.ContainsRune(p, '?') {
			return "", "", nil, fmt.Errorf("sqlitelease: open %q: the path %q contains '?', which the SQLite driver reads as the start of its options", path, p)
		}
	}
	if err := checkLength(path, real); err != nil {
		return "", "", nil, err
	}
	if !cfg.allowNetworkFS {
		target := real
		if _, err := os.Stat(real); err != nil {
			target = filepath.Dir(real)
		}
		name, err := networkFSName(target)
		if err != nil {
			return "", "", nil, fmt.Errorf("sqlitelease: open %q: check the filesystem of %q: %w", path, target, err)
		}
		if name != "" {
			return "", "", nil, fmt.Errorf("sqlitelease: open %q: %q is on %s: %w; pass AllowNetworkFS() only if no other host ever opens this file",
				path, target, name, ErrNetworkFS)
		}
	}
	if err := checkWAL(path, real); err != nil {
		return "", "", nil, err
	}
	if hold, err = holdFile(path, real); err != nil {
		return "", "", nil, err
	}
	return abs, real, hold, nil
}

// checkWAL refuses a database file missing or empty next to a write-ahead
// log that is not: a file truncated or deleted while a process had it open.
// The WAL is looked at first: one being created has a database page before it.
func checkWAL(path, real string) error {
	wal, err := os.Stat(real + "-wal")
	if err != nil || wal.Size() == 0 {
		return nil
	}
	db, err := os.Stat(real)
	switch {
	case err == nil && db.Size() > 0:
		return nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil // SQLite will say what is wrong with it
	}
	return fmt.Errorf("sqlitelease: open %q: the database file is missing or empty, but its write-ahead log %q holds %d bytes: "+
		"the file was truncated or deleted while a process had it open; stop the processes that use it, "+
		"then restore the file from a backup, or remove its -wal and -shm files too to start with no leases",
		path, real+"-wal", wal.Size())
}

// setUp checks the journal mode, migrates the schema and prepares the lease
// connection, retried whole: processes that create one file at once can
// find it locked in ways SQLite's busy handler does not wait for.
func (s *Store) setUp(ctx context.Context) (from int, err error) {
	err = retryBusy(ctx, func() (err error) {
		s.lc, from, err = trySetUp(ctx, s.DB(), s.Clock())
		return err
	})
	return from, err
}

func trySetUp(ctx context.Context, db *sql.DB, clk clock.Clock) (_ *leaseConn, from int, err error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, 0, err
	}
	lc := &leaseConn{conn: c}
	var mode string
	err = retryBusy(ctx, func() error {
		return c.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode)
	})
	if err == nil && !strings.EqualFold(mode, "wal") {
		err = fmt.Errorf("%w: its journal mode is %q (is it on a network filesystem?)", ErrNotWAL, mode)
	}
	if err == nil {
		from, err = migrate(ctx, c, clk)
	}
	if err == nil {
		err = lc.prepare(ctx)
	}
	if err != nil {
		_ = lc.close()
		return nil, 0, err
	}
	return lc, from, nil
}

// openError names the path and, for SQLite's own errors, the cause.
func openError(path string, err error) error {
	var cause string
	switch sqliteCode(err) {
	case sqlite3.SQLITE_NOTADB:
		cause = "the file is not an SQLite database"
	case sqlite3.SQLITE_CORRUPT:
		cause = "the database file is corrupt"
	case sqlite3.SQLITE_CANTOPEN:
		cause = "SQLite cannot open the file or create its -wal and -shm files next to it"
	case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM:
		cause = "the file or its directory is not writable"
	case sqlite3.SQLITE_IOERR:
		cause = "I/O error"
	case sqlite3.SQLITE_FULL:
		cause = "the disk is full"
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		cause = "other connections kept the database locked"
	}
	if cause == "" {
		return fmt.Errorf("sqlitelease: open %q: %w", path, err)
	}
	return fmt.Errorf("sqlitelease: open %q: %s: %w", path, cause, err)
}
