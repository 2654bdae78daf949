package sqlitelease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leaderaware/leaderaware/internal/clock"
)

// closeTimeout bounds how long Close tries to clear the liveness records of
// the leases its Store still holds. Tests shorten it.
var closeTimeout = 10 * time.Second

// errSidecarClosed is returned by a sidecar's test after its close.
var errSidecarClosed = errors.New("the liveness file is closed")

// sidecar is the liveness file of a Store: the file <db>-live, in which the
// Store holds an open-file-description lock on one byte at a random offset
// from Open to Close. The kernel drops the lock when the last descriptor of
// it closes, which for a process that dies is its death. The descriptor is
// a raw one, not an *os.File, whose finalizer would drop the lock if a
// Store were dropped without Close while its job still ran. The file's data
// is the token high-water mark, guarded by a lock on byte 0 (see withMark).
type sidecar struct {
	path   string // for error messages
	file   string // "dev:ino": the file's identity, which every row records
	offset int64  // the byte this Store locks, > 0

	mu sync.Mutex // guards fd, so that a test never uses a closed or reused descriptor
	fd int        // -1 once closed
}

// holderID identifies the Store instance of a lease's holder: the liveness
// file and byte it locks. The zero holderID is unknown.
type holderID struct {
	file   string
	offset int64
}

// known reports whether id names a byte.
func (id holderID) known() bool { return id.file != "" && id.offset > 0 }

// args returns the live_file and live_offset values that the lease
// statements record for this Store: NULL where it has no sidecar.
func (sc *sidecar) args() (file, offset any) {
	if sc == nil {
		return nil, nil
	}
	return sc.file, sc.offset
}

// testable reports whether this Store can test the liveness of the holder
// id: the holder locked a byte of the file this Store has open, and is not
// this Store itself (whose own lock never conflicts with its tests).
func (sc *sidecar) testable(id holderID) bool {
	return sc != nil && id.known() && id.file == sc.file && id.offset != sc.offset
}

// gone reports whether the holder id is proven to have no process left that
// could run its job: no lock is on its byte. Any doubt (an untestable
// holder, an error) is false.
func (sc *sidecar) gone(id holderID) bool {
	if !sc.testable(id) {
		return false
	}
	held, err := sc.held(id.offset)
	return err == nil && !held
}

// clearSQL forgets the liveness record of every unreleased lease that this
// Store (?1 file, ?2 offset) holds, bumping the version (floored at ?3,
// the wall clock in ms, as the lease statements floor it). Candidates then
// apply the elapsed-time rule alone to those leases.
const clearSQL = `UPDATE ` + leaseTable + ` SET version = max(version + 1, ?3 * 1000), written_at = ?3,
	live_file = NULL, live_offset = NULL, live_version = NULL
WHERE live_file = ?1 AND live_offset = ?2 AND live_version = version AND NOT released`

// clearLive runs clearSQL for Close on lc, the connection that has the
// file open whatever the path names now (the path may be away for a moment,
// as in `mv app.db x; mv x app.db`, and the rows come back with it). Without
// lc it uses the pool, whose new connections open the path, so only while
// the path names the file.
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
		_, err := exec(ctx, clearSQL, s.live.file, s.live.offset, clock.Wall().UnixMilli())
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

// fileMarkSQL reads the largest token the database file knows of.
const fileMarkSQL = `SELECT max(
	coalesce((SELECT value FROM ` + metaTable + ` WHERE key = '` + highWaterKey + `'), 0),
	coalesce((SELECT max(token) FROM ` + leaseTable + `), 0))`

// seedMark raises the high-water mark of the liveness file to the largest
// token the database file knows of, for Open: tokens issued while the
// liveness file kept no mark (by an older release, or before it was
// deleted) then also stay below new tokens once the database file is lost.
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

// scanLive returns the holder recorded by a lease row's live_file and
// live_offset (NULL when unknown).
func scanLive(file sql.NullString, offset sql.NullInt64) holderID {
	if !file.Valid || !offset.Valid {
		return holderID{}
	}
	return holderID{file: file.String, offset: offset.Int64}
}
