package sqlitelease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"
)

// closeTimeout bounds Close's clearing of liveness records. Tests shorten it.
var closeTimeout = 10 * time.Second

var errSidecarClosed = errors.New("the liveness file is closed")

// sidecar is the liveness file <db>-live of a Store (see Process death in the
// package documentation): a raw descriptor, not an *os.File, whose finalizer
// would drop the lock of a Store dropped without Close. Its data is the token
// high-water mark, guarded by a lock on byte 0 (see withMark).
type sidecar struct {
	path   string // for error messages
	file   string // "dev:ino": the file's identity, which every row records
	offset int64  // the byte this Store locks, > 0

	mu sync.Mutex // guards fd, so that a test never uses a closed or reused descriptor
	fd int        // -1 once closed
}

// holderID is a holder Store's liveness file and byte; zero if unknown.
type holderID struct {
	file   string
	offset int64
}

func (id holderID) known() bool { return id.file != "" && id.offset > 0 }

// args returns the live_file and live_offset that lease statements record.
func (sc *sidecar) args() (file, offset any) {
	if sc == nil {
		return nil, nil
	}
	return sc.file, sc.offset
}

// testable reports whether id locked a byte of this Store's liveness file,
// other than this Store's own.
func (sc *sidecar) testable(id holderID) bool {
	return sc != nil && id.known() && id.file == sc.file && id.offset != sc.offset
}

// gone reports whether no lock is on id's byte: no process of that holder is
// left to run its job. Any doubt is false.
func (sc *sidecar) gone(id holderID) bool {
	if !sc.testable(id) {
		return false
	}
	held, err := sc.held(id.offset)
	return err == nil && !held
}

// clearSQL forgets the liveness record of the unreleased leases of the Store
// (?1 file, ?2 offset), bumping the version (floored at ?3, the wall clock in
// ms): candidates then apply the elapsed-time rule alone.
const clearSQL = `UPDATE ` + leaseTable + ` SET version = max(version + 1, ?3 * 1000), written_at = ?3,
	live_file = NULL, live_offset = NULL, live_version = NULL
WHERE live_file = ?1 AND live_offset = ?2 AND live_version = version AND NOT released`

// clearLive runs clearSQL for Close on lc, which has the file open whatever
// the path names now, or else on the pool while the path names the file.
func (s *Store) clearLive(lc *leaseConn) error {
	if s.live == nil || !s.recorded.Load() {
		return nil
	}
	if err := s.tryClearLive(lc); err != nil {
		return fmt.Errorf("clear the liveness records of the leases it holds, so its liveness lock in %q stays held until the process exits: %w",
			s.live.path, err)
	}
	return nil
}

func (s *Store) tryClearLive(lc *leaseConn) error {
	exec, query := s.DB().ExecContext, s.DB().QueryRowContext
	if lc != nil {
		exec, query = lc.conn.ExecContext, lc.conn.QueryRowContext
	} else if err := s.checkFile(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	err := retryBusy(ctx, func() error {
		_, err := exec(ctx, clearSQL, s.live.file, s.live.offset, s.Clock().Wall().UnixMilli())
		return err
	})
	if err != nil {
		// A dropped lease table holds no rows to clear.
		var n int
		if query(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1`, leaseTable).Scan(&n) == nil && n == 0 {
			return nil
		}
	}
	return err
}

const fileMarkSQL = `SELECT max(
	coalesce((SELECT value FROM ` + metaTable + ` WHERE key = '` + highWaterKey + `'), 0),
	coalesce((SELECT max(token) FROM ` + leaseTable + `), 0))`

// seedMark raises the mark in the liveness file to the largest token the
// database file knows of, for tokens issued while the liveness file kept none.
func (s *Store) seedMark(ctx context.Context) error {
	if s.live == nil {
		return nil
	}
	err := s.withLease(ctx, func(lc *leaseConn) error {
		return lc.writeTx(ctx, func() error {
			return s.live.withMark(ctx, func(int64) (high int64, err error) {
				err = lc.conn.QueryRowContext(ctx, fileMarkSQL).Scan(&high)
				return high, err
			})
		})
	})
	if err != nil {
		return fmt.Errorf("record the file's token high-water mark in %q: %w", s.live.path, err)
	}
	return nil
}

func scanLive(file sql.NullString, offset sql.NullInt64) holderID {
	if !file.Valid || !offset.Valid {
		return holderID{}
	}
	return holderID{file: file.String, offset: offset.Int64}
}
