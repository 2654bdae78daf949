package pglease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leaderaware/leaderaware/elector"
)

// Store is an [elector.Store] on one PostgreSQL lease table. Time is the
// server's: every expiry is computed and compared with now() in SQL. Every
// lease operation is one autocommit statement (TryAcquire of a free lease is
// a read, then one upsert); nothing the leases depend on lives in the
// session (no session-level advisory locks), so a Store survives reconnects
// and pool recycling.
//
// Store also implements [elector.ReleaseWatcher]: Release sends a NOTIFY,
// and one listener connection per Store wakes the candidates waiting in any
// process (see [Store.WatchRelease]).
//
// A Store is safe for concurrent use. Close it when done.
type Store struct {
	pool     *pgxpool.Pool
	ownsPool bool
	opts     options
	schema   string // unquoted
	// table and versionTable are quoted and schema-qualified.
	table, versionTable string
	channel             string   // the NOTIFY channel, unquoted
	target              string   // host, port, database and user, for errors
	secrets             []string // masked in every error and log message

	sqlRead, sqlUpsert, sqlRenew, sqlRelease, sqlGet, sqlFence, sqlFenceRecheck string

	// listenKeepAlive is the listener's keepAlive: listenKeepAlive, shorter
	// in tests.
	listenKeepAlive time.Duration

	closed    atomic.Bool
	closeOnce sync.Once

	mu       sync.Mutex
	watchers map[string]map[chan struct{}]struct{} // by lease name
	listener *listener                             // started by the first WatchRelease
}

var _ interface {
	elector.Store
	elector.ReleaseWatcher
} = (*Store)(nil)

// Pool returns the pool the store runs on, to share with fenced writes and
// other work. The caller must not close it; [Store.Close] does, when the
// pool came from [Open].
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Table returns the schema-qualified, quoted name of the lease table, ready
// to use in SQL.
func (s *Store) Table() string { return s.table }

func (s *Store) prepareSQL() {
	t := s.table
	s.sqlRead = `SELECT holder, token, expires_at, expires_at > now() FROM ` + t + ` WHERE name = $1`
	// The upsert first locks the lease row without waiting: a row that a
	// fenced write or another acquire holds is in use (lock_not_available,
	// reported as held). Waiting instead would let a candidate that gave up
	// (its context ended) commit the upsert later, holding a lease it never
	// learned it won.
	s.sqlUpsert = `WITH locked AS (SELECT name FROM ` + t + ` WHERE name = $1 FOR UPDATE NOWAIT)
INSERT INTO ` + t + ` AS l (name, holder, token, expires_at, acquired_at, renewed_at)
SELECT $1, $2, 1, now() + $3::bigint * interval '1 microsecond', now(), now()
WHERE (SELECT count(*) FROM locked) >= 0
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, token = l.token + 1,
	expires_at = excluded.expires_at, acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at
WHERE l.expires_at <= now()
RETURNING token, expires_at`
	s.sqlRenew = `UPDATE ` + t + ` SET expires_at = now() + $4::bigint * interval '1 microsecond', renewed_at = now()
WHERE name = $1 AND holder = $2 AND token = $3 AND expires_at > now()
RETURNING expires_at`
	s.sqlRelease = `WITH released AS (
	UPDATE ` + t + ` SET expires_at = now()
	WHERE name = $1 AND holder = $2 AND token = $3 AND expires_at > now()
	RETURNING name
)
SELECT released.name FROM released, LATERAL pg_notify($4, released.name)`
	s.sqlGet = `SELECT holder, token, expires_at FROM ` + t + ` WHERE name = $1 AND expires_at > now()`
	s.sqlFenceRecheck = `SELECT token FROM ` + t + `
WHERE name = $1 AND holder = $2 AND token = $3 AND expires_at > clock_timestamp()`
	s.sqlFence = `SELECT token FROM ` + t + `
WHERE name = $1 AND holder = $2 AND token = $3 AND expires_at > clock_timestamp() FOR SHARE`
}

// TryAcquire implements [elector.Store]. It first reads the lease with a
// plain SELECT: if a live holder has it (the caller included), it returns a
// *[elector.HeldError] without taking a row lock or writing anything. Only a
// free or expired lease is upserted, with the token one larger than the
// last.
func (s *Store) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration) (elector.Lease, error) {
	if err := s.check(name, ttl); err != nil {
		return elector.Lease{}, err
	}
	if err := elector.ValidateHolder(holder); err != nil {
		return elector.Lease{}, fmt.Errorf("pglease: %w", err)
	}
	const attempts = 3
	var cur elector.Lease
	for range attempts {
		var (
			token int64
			live  bool
			err   error
		)
		cur = elector.Lease{Name: name}
		err = s.queryRow(ctx, true, s.sqlRead, []any{name}, &cur.Holder, &token, &cur.ExpiresAt, &live)
		switch {
		case err == nil && live:
			cur.Token = uint64(token)
			return elector.Lease{}, &elector.HeldError{Lease: cur}
		case err != nil && !errors.Is(err, pgx.ErrNoRows):
			return elector.Lease{}, s.opErr("acquire", name, err)
		}
		l := elector.Lease{Name: name, Holder: holder}
		err = s.queryRow(ctx, false, s.sqlUpsert, []any{name, holder, micros(ttl)}, &token, &l.ExpiresAt)
		switch {
		case err == nil:
			l.Token = uint64(token)
			return l, nil
		case isLockNotAvailable(err):
			return elector.Lease{}, &elector.HeldError{Lease: cur} // in use right now
		case !errors.Is(err, pgx.ErrNoRows):
			return elector.Lease{}, s.opErr("acquire", name, err)
		}
		// Another candidate took it between our read and our upsert: read
		// again to name the winner.
	}
	return elector.Lease{}, &elector.HeldError{Lease: cur}
}

// Renew implements [elector.Store]. One UPDATE extends the lease by ttl from
// the server's now() if l (name, holder and token) is still the current,
// unexpired term; otherwise it returns an error wrapping
// [elector.ErrLeaseLost], and nothing changes.
func (s *Store) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	if err := s.check(l.Name, ttl); err != nil {
		return elector.Lease{}, err
	}
	r := l
	err := s.queryRow(ctx, true, s.sqlRenew, []any{l.Name, l.Holder, int64(l.Token), micros(ttl)}, &r.ExpiresAt)
	switch {
	case err == nil:
		return r, nil
	case errors.Is(err, pgx.ErrNoRows):
		return elector.Lease{}, fmt.Errorf("pglease: renew lease %q token %d of %q: %w", l.Name, l.Token, l.Holder, elector.ErrLeaseLost)
	default:
		return elector.Lease{}, s.opErr("renew", l.Name, err)
	}
}

// Release implements [elector.Store]. If l is still the current, unexpired
// term, one statement sets its expiry to the server's now() (the row and its
// token stay) and sends a NOTIFY on the store's channel with the lease name
// as payload; the watchers of this Store wake at once, those of other
// Stores when their listener hears it. Otherwise it changes nothing and
// returns nil.
func (s *Store) Release(ctx context.Context, l elector.Lease) error {
	if err := s.check(l.Name, time.Second); err != nil {
		return err
	}
	var released string
	err := s.queryRow(ctx, true, s.sqlRelease, []any{l.Name, l.Holder, int64(l.Token), s.channel}, &released)
	switch {
	case err == nil:
		s.poke(l.Name)
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	default:
		return s.opErr("release", l.Name, err)
	}
}

// Get implements [elector.Store]: the live lease of name by the server's
// clock, or an error wrapping [elector.ErrNoLease].
func (s *Store) Get(ctx context.Context, name string) (elector.Lease, error) {
	if err := s.check(name, time.Second); err != nil {
		return elector.Lease{}, err
	}
	l := elector.Lease{Name: name}
	var token int64
	err := s.queryRow(ctx, true, s.sqlGet, []any{name}, &l.Holder, &token, &l.ExpiresAt)
	switch {
	case err == nil:
		l.Token = uint64(token)
		return l, nil
	case errors.Is(err, pgx.ErrNoRows):
		return elector.Lease{}, fmt.Errorf("pglease: lease %q: %w", name, elector.ErrNoLease)
	default:
		return elector.Lease{}, s.opErr("get", name, err)
	}
}

// check validates what every operation gets.
func (s *Store) check(name string, ttl time.Duration) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := elector.ValidateName(name); err != nil {
		return err
	}
	return elector.ValidateTTL(ttl)
}

// queryRow runs one statement and scans its row. It tries again once, on a
// fresh connection, when the first attempt failed for want of a connection
// rather than because of the statement: always if pgx says the statement
// never reached the server (pgconn.SafeToRetry), and, for statements that may
// run twice (idempotent), also when the connection broke with the outcome
// unknown, as when the server terminated the pool's idle backend.
func (s *Store) queryRow(ctx context.Context, idempotent bool, sql string, args []any, dest ...any) error {
	err := s.pool.QueryRow(ctx, sql, args...).Scan(dest...)
	if err != nil && ctx.Err() == nil && !s.closed.Load() &&
		(pgconn.SafeToRetry(err) || idempotent && connectionLost(err)) {
		err = s.pool.QueryRow(ctx, sql, args...).Scan(dest...)
	}
	return err
}

// connectionLost reports whether err means the connection failed, not the
// statement: a network error, or the server ending the session (SQLSTATE
// class 57P: admin_shutdown, crash_shutdown, cannot_connect_now).
func connectionLost(err error) bool {
	if errors.Is(err, pgx.ErrNoRows) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "57P")
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, pgconn.ErrConnClosed)
}

func (s *Store) opErr(op, name string, err error) error {
	err = withoutSecrets(err, s.secrets...)
	if s.closed.Load() {
		return fmt.Errorf("pglease: %s lease %q: %w (%v)", op, name, ErrClosed, err)
	}
	return fmt.Errorf("pglease: %s lease %q on %s: %w", op, name, s.target, err)
}

// micros is d in whole microseconds, PostgreSQL's resolution, rounded up so
// that a positive TTL never becomes zero.
func micros(d time.Duration) int64 {
	return int64((d + time.Microsecond - 1) / time.Microsecond)
}

// isLockNotAvailable reports whether err is PostgreSQL's lock_not_available
// (55P03), the error of a NOWAIT lock on a row that another transaction holds.
func isLockNotAvailable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}
