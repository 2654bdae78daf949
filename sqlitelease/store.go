package sqlitelease

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderaware/leaderaware/elector"
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
	path string // as given to Open, for error messages
	cfg  config
	db   *sql.DB

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

// The lease statements. Each is one autocommit statement; ?now is Unix
// milliseconds by the Go process's clock.
const (
	// acquireSQL starts a new term if the lease is new, or its current term
	// has expired. A live term, even the caller's own, is left alone, and
	// then the statement returns no row.
	acquireSQL = `INSERT INTO ` + leaseTable + ` (name, holder, token, expires_at, acquired_at)
VALUES (?1, ?2, 1, ?4, ?3)
ON CONFLICT (name) DO UPDATE SET
	holder = excluded.holder,
	token = token + 1,
	expires_at = excluded.expires_at,
	acquired_at = excluded.acquired_at
WHERE expires_at <= ?3
RETURNING token, expires_at`
	// getSQL reads the live term of a lease.
	getSQL = `SELECT holder, token, expires_at FROM ` + leaseTable + `
WHERE name = ?1 AND expires_at > ?2`
	// renewSQL extends the caller's term if it is still current and live.
	renewSQL = `UPDATE ` + leaseTable + ` SET expires_at = ?5
WHERE name = ?1 AND holder = ?2 AND token = ?3 AND expires_at > ?4
RETURNING expires_at`
	// releaseSQL ends the caller's term now if it is still current and live.
	// It never touches the token.
	releaseSQL = `UPDATE ` + leaseTable + ` SET expires_at = ?4
WHERE name = ?1 AND holder = ?2 AND token = ?3 AND expires_at > ?4`
)

// leaseConn is the one connection that carries lease traffic, with its
// prepared statements. It is taken out of the pool for the store's lifetime,
// so renewals never wait in Go's pool behind job work.
type leaseConn struct {
	conn                         *sql.Conn
	acquire, get, renew, release *sql.Stmt
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
	}{{&lc.acquire, acquireSQL}, {&lc.get, getSQL}, {&lc.renew, renewSQL}, {&lc.release, releaseSQL}} {
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
	for _, st := range []*sql.Stmt{lc.acquire, lc.get, lc.renew, lc.release} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	errs = append(errs, lc.conn.Close())
	return errors.Join(errs...)
}

// withLease runs op on the lease connection, alone, and retries it while the
// database is busy, until ctx ends. A connection that broke is replaced on
// the next call.
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
	if s.lc == nil {
		var lc *leaseConn
		err := retryBusy(ctx, func() (err error) {
			lc, err = newLeaseConn(ctx, s.db)
			return err
		})
		if err != nil {
			return fmt.Errorf("sqlitelease: %q: reconnect: %w", s.path, err)
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

// expiry returns the Unix millisecond at which a lease of ttl taken at now
// (Unix ms, rounded down from the real instant) expires: one millisecond for
// that rounding plus ttl rounded up to whole milliseconds, so the store never
// lets a lease go before the holder's own start + TTL (a positive TTL never
// makes an already-expired lease), and capped instead of overflowing.
func expiry(now int64, ttl time.Duration) int64 {
	ms := int64(ttl / time.Millisecond)
	if ttl%time.Millisecond != 0 {
		ms++
	}
	if ms >= math.MaxInt64-now {
		return math.MaxInt64
	}
	return now + 1 + ms
}

// TryAcquire implements [elector.Store]. It starts a new term if the lease is
// free or expired, with a token one larger than the last. If a live holder
// has it, even holder itself, it returns a *[elector.HeldError] that names
// the holder. name and holder must be valid ([elector.ValidateName],
// [elector.ValidateHolder]) and ttl positive.
func (s *Store) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration) (elector.Lease, error) {
	if err := checkArgs(name, ttl); err != nil {
		return elector.Lease{}, err
	}
	if err := elector.ValidateHolder(holder); err != nil {
		return elector.Lease{}, err
	}
	var l elector.Lease
	err := s.withLease(ctx, func(lc *leaseConn) error {
		for {
			now := time.Now().UnixMilli()
			var token, expires int64
			rows, err := lc.acquire.QueryContext(ctx, name, holder, now, expiry(now, ttl))
			err = scanOne(rows, err, &token, &expires)
			if err == nil {
				l = elector.Lease{Name: name, Holder: holder, Token: uint64(token), ExpiresAt: time.UnixMilli(expires)}
				return nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			// A live term holds the lease: name its holder.
			var cur elector.Lease
			err = lc.get.QueryRowContext(ctx, name, now).Scan(&cur.Holder, &token, &expires)
			if err == nil {
				cur.Name, cur.Token, cur.ExpiresAt = name, uint64(token), time.UnixMilli(expires)
				return &elector.HeldError{Lease: cur}
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			// Another process released it in between: try again.
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	})
	if err != nil {
		return elector.Lease{}, s.opError("acquire", name, err)
	}
	return l, nil
}

// Renew implements [elector.Store]. It extends l by ttl from now if l is
// still the current, unexpired term, keeping its token; otherwise it returns
// an error matching [elector.ErrLeaseLost].
func (s *Store) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	if err := checkArgs(l.Name, ttl); err != nil {
		return elector.Lease{}, err
	}
	var expires int64
	err := s.withLease(ctx, func(lc *leaseConn) error {
		now := time.Now().UnixMilli()
		rows, err := lc.renew.QueryContext(ctx, l.Name, l.Holder, int64(l.Token), now, expiry(now, ttl))
		return scanOne(rows, err, &expires)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return elector.Lease{}, fmt.Errorf("sqlitelease: renew lease %q token %d of %q: %w", l.Name, l.Token, l.Holder, elector.ErrLeaseLost)
	}
	if err != nil {
		return elector.Lease{}, s.opError("renew", l.Name, err)
	}
	l.ExpiresAt = time.UnixMilli(expires)
	return l, nil
}

// Release implements [elector.Store]. It ends l now if l is still the
// current, unexpired term, and wakes the candidates that watch the lease; it
// returns nil, changing nothing, if l is not. The token stays.
func (s *Store) Release(ctx context.Context, l elector.Lease) error {
	if err := elector.ValidateName(l.Name); err != nil {
		return err
	}
	var n int64
	err := s.withLease(ctx, func(lc *leaseConn) error {
		res, err := lc.release.ExecContext(ctx, l.Name, l.Holder, int64(l.Token), time.Now().UnixMilli())
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

// Get implements [elector.Store]. It returns the live term of name, or an
// error matching [elector.ErrNoLease].
func (s *Store) Get(ctx context.Context, name string) (elector.Lease, error) {
	if err := elector.ValidateName(name); err != nil {
		return elector.Lease{}, err
	}
	l := elector.Lease{Name: name}
	var token, expires int64
	err := s.withLease(ctx, func(lc *leaseConn) error {
		return lc.get.QueryRowContext(ctx, name, time.Now().UnixMilli()).Scan(&l.Holder, &token, &expires)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return elector.Lease{}, fmt.Errorf("sqlitelease: lease %q: %w", name, elector.ErrNoLease)
	}
	if err != nil {
		return elector.Lease{}, s.opError("get", name, err)
	}
	l.Token, l.ExpiresAt = uint64(token), time.UnixMilli(expires)
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

// Close stops the store's goroutine, closes its connections and the
// database handle. Later calls return the result of the first. Operations
// after Close return [ErrClosed].
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
		if lc != nil {
			errs = append(errs, lc.close())
		}
		errs = append(errs, s.db.Close())
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("sqlitelease: close %q: %w", s.path, err)
		}
	})
	return s.closeErr
}
