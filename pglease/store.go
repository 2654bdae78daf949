package pglease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/clock"
)

// Store is an [elector.Store] on one PostgreSQL lease table. It never
// compares timestamps: a lease row records its holder's TTL and a version
// that every write bumps, and candidates measure leases on their own clocks.
// Every lease operation is one autocommit statement; nothing the leases
// depend on lives in the session (no session-level advisory locks), so a
// Store survives reconnects and pool recycling.
//
// Store also implements [elector.ReleaseWatcher]: Release sends a NOTIFY,
// and one listener connection per Store wakes the candidates waiting in any
// process (see [Store.WatchRelease]).
//
// A Store is safe for concurrent use. Close it when done.
type Store struct {
	pool     *pgxpool.Pool // for jobs and fenced writes (Pool)
	ownsPool bool
	leases   *pgxpool.Pool // for lease operations and the schema
	opts     options
	schema   string // unquoted
	// table and versionTable are quoted and schema-qualified.
	table, versionTable string
	channel             string   // the NOTIFY channel, unquoted
	target              string   // host, port, database and user, for errors
	secrets             []string // masked in every error and log message

	sqlAcquire, sqlRenew, sqlRelease, sqlGet, sqlFence string

	// listenKeepAlive is the listener's keepAlive: listenKeepAlive, shorter
	// in tests.
	listenKeepAlive time.Duration

	closed    atomic.Bool
	closeOnce sync.Once

	mu       sync.Mutex
	watchers map[string]map[chan struct{}]struct{} // by lease name
	listener *listener                             // started by the first WatchRelease
	stamps   map[string]stamp                      // by lease name, for fenced writes
}

// stamp is the last successful acquire or renew of a lease through this
// Store: the term's token, the TTL it recorded and the instant (by
// [clock.Now]) the call started, from which the holder's trust counts.
type stamp struct {
	token uint64
	ttl   time.Duration
	start time.Time
}

var _ interface {
	elector.Store
	elector.ReleaseWatcher
} = (*Store)(nil)

// Pool returns the pool for fenced writes and other work of the jobs: the
// one [Open] made, or the one given to [New]. Lease operations never use
// it; they run on a small pool of their own, so job queries cannot starve
// renewals. The caller must not close it; [Store.Close] does, when the pool
// came from Open.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Table returns the schema-qualified, quoted name of the lease table, ready
// to use in SQL.
func (s *Store) Table() string { return s.table }

func (s *Store) prepareSQL() {
	t := s.table
	// cur reads the row in the statement's snapshot. If it shows a lease
	// held and not observed, that row is the answer: no insert is tried, so
	// no row lock is taken or waited for. Otherwise the upsert is the
	// compare-and-set, checked again on the latest row; if that finds the
	// row changed, the statement returns no row.
	s.sqlAcquire = `WITH cur AS (
	SELECT holder, token, version, ttl_us, written_at, released FROM ` + t + ` WHERE name = $1
), won AS (
	INSERT INTO ` + t + ` AS l (name, holder, token, version, ttl_us, released, written_at)
	SELECT $1, $2::text, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, 1, $3::bigint, false, now()
	WHERE NOT EXISTS (SELECT 1 FROM cur WHERE NOT released AND NOT (token = $4 AND version = $5))
	ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, token = GREATEST(l.token + 1, excluded.token),
		version = l.version + 1, ttl_us = excluded.ttl_us, released = false, written_at = excluded.written_at
	WHERE l.released OR (l.token = $4 AND l.version = $5)
	RETURNING holder, token, version, ttl_us, written_at
)
SELECT true, holder, token, version, ttl_us, written_at FROM won
UNION ALL
SELECT false, holder, token, version, ttl_us, written_at FROM cur
WHERE NOT released AND NOT (token = $4 AND version = $5)`
	s.sqlRenew = `UPDATE ` + t + ` SET version = version + 1, ttl_us = $4, written_at = now()
WHERE name = $1 AND holder = $2 AND token = $3 AND NOT released
RETURNING version, ttl_us, written_at`
	s.sqlRelease = `WITH released AS (
	UPDATE ` + t + ` SET released = true, version = version + 1, written_at = now()
	WHERE name = $1 AND holder = $2 AND token = $3 AND NOT released
	RETURNING name
)
SELECT released.name FROM released, LATERAL pg_notify($4, released.name)`
	s.sqlGet = `SELECT holder, token, version, ttl_us, written_at FROM ` + t + ` WHERE name = $1 AND NOT released`
	s.sqlFence = `SELECT true FROM ` + t + `
WHERE name = $1 AND holder = $2 AND token = $3 AND NOT released FOR SHARE`
}

// acquireAttempts bounds how often TryAcquire runs its statement when the
// lease changes between the statement's read and its compare-and-set.
const acquireAttempts = 5

// TryAcquire implements [elector.Store]. One statement reads the lease and,
// if it is free or still is observed, takes it with a compare-and-set. The
// new token is larger than the last one and than the server's clock in
// microseconds, so tokens keep growing even after the lease rows are
// deleted. A lease held and not observed is answered from the read, without
// a row lock; a takeover waits for a fenced write in progress on the lease
// (see [Store.FencedLease]).
func (s *Store) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	if err := s.check(name, ttl); err != nil {
		return elector.Lease{}, err
	}
	if err := elector.ValidateHolder(holder); err != nil {
		return elector.Lease{}, fmt.Errorf("pglease: %w", err)
	}
	args := []any{name, holder, micros(ttl), int64(observed.Token), int64(observed.Version)}
	for range acquireAttempts {
		var won bool
		start := clock.Now()
		l, err := s.scanLease(ctx, false, name, s.sqlAcquire, args, &won)
		switch {
		case err == nil && won:
			s.stamp(l, start)
			return l, nil
		case err == nil:
			return elector.Lease{}, &elector.HeldError{Lease: l}
		case !errors.Is(err, pgx.ErrNoRows):
			return elector.Lease{}, s.opErr("acquire", name, err)
		}
		// The lease changed between the read and the compare-and-set: look
		// again.
	}
	return elector.Lease{}, fmt.Errorf("pglease: acquire lease %q: it changed %d times during the call; try again", name, acquireAttempts)
}

// Renew implements [elector.Store]. One UPDATE records ttl and bumps the
// version if l (name, holder and token) is still the current, unreleased
// term; otherwise it returns an error wrapping [elector.ErrLeaseLost], and
// nothing changes.
func (s *Store) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	if err := s.check(l.Name, ttl); err != nil {
		return elector.Lease{}, err
	}
	r := l
	var version, ttlUS int64
	start := clock.Now()
	err := s.queryRow(ctx, true, s.sqlRenew, []any{l.Name, l.Holder, int64(l.Token), micros(ttl)}, &version, &ttlUS, &r.Written)
	switch {
	case err == nil:
		r.Version, r.TTL = uint64(version), fromMicros(ttlUS)
		s.stamp(r, start)
		return r, nil
	case errors.Is(err, pgx.ErrNoRows):
		return elector.Lease{}, fmt.Errorf("pglease: renew lease %q token %d of %q: %w", l.Name, l.Token, l.Holder, elector.ErrLeaseLost)
	default:
		return elector.Lease{}, s.opErr("renew", l.Name, err)
	}
}

// Release implements [elector.Store]. If l is still the current, unreleased
// term, one statement marks it released (the row and its token stay) and
// sends a NOTIFY on the store's channel with the lease name as payload; the
// watchers of this Store wake at once, those of other Stores when their
// listener hears it. Otherwise it changes nothing and returns nil.
func (s *Store) Release(ctx context.Context, l elector.Lease) error {
	if err := s.check(l.Name, time.Second); err != nil {
		return err
	}
	var released string
	err := s.queryRow(ctx, true, s.sqlRelease, []any{l.Name, l.Holder, int64(l.Token), s.channel}, &released)
	switch {
	case err == nil:
		s.mu.Lock()
		if s.stamps[l.Name].token == l.Token {
			delete(s.stamps, l.Name)
		}
		s.mu.Unlock()
		s.poke(l.Name)
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	default:
		return s.opErr("release", l.Name, err)
	}
}

// Get implements [elector.Store]: the unreleased lease of name, whether or
// not its holder still renews it, or an error wrapping [elector.ErrNoLease].
func (s *Store) Get(ctx context.Context, name string) (elector.Lease, error) {
	if err := s.check(name, time.Second); err != nil {
		return elector.Lease{}, err
	}
	l, err := s.scanLease(ctx, true, name, s.sqlGet, []any{name})
	switch {
	case err == nil:
		return l, nil
	case errors.Is(err, pgx.ErrNoRows):
		return elector.Lease{}, fmt.Errorf("pglease: lease %q: %w", name, elector.ErrNoLease)
	default:
		return elector.Lease{}, s.opErr("get", name, err)
	}
}

// scanLease runs a statement whose row ends in holder, token, version,
// ttl_us and written_at, after the columns that first point to.
func (s *Store) scanLease(ctx context.Context, idempotent bool, name, sql string, args []any, first ...any) (elector.Lease, error) {
	l := elector.Lease{Name: name}
	var token, version, ttlUS int64
	err := s.queryRow(ctx, idempotent, sql, args, append(first, &l.Holder, &token, &version, &ttlUS, &l.Written)...)
	l.Token, l.Version, l.TTL = uint64(token), uint64(version), fromMicros(ttlUS)
	return l, err
}

// stamp records that this Store acquired or renewed l in a call that
// started at start.
func (s *Store) stamp(l elector.Lease, start time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stamps[l.Name] = stamp{token: l.Token, ttl: l.TTL, start: start}
}

// trustLeft returns how long the holder of l still trusts its term: until
// the start of its last acquire or renew through this Store plus the TTL
// minus the safety margin, as the elector counts. For a term this Store
// did not write, it returns a whole trust window of l's TTL.
func (s *Store) trustLeft(l elector.Lease) time.Duration {
	s.mu.Lock()
	st, ok := s.stamps[l.Name]
	s.mu.Unlock()
	if !ok || st.token != l.Token {
		return l.TTL - elector.SafetyMargin(l.TTL)
	}
	return clock.Until(st.start.Add(st.ttl - elector.SafetyMargin(st.ttl)))
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
	err := s.leases.QueryRow(ctx, sql, args...).Scan(dest...)
	if err != nil && ctx.Err() == nil && !s.closed.Load() &&
		(pgconn.SafeToRetry(err) || idempotent && connectionLost(err)) {
		err = s.leases.QueryRow(ctx, sql, args...).Scan(dest...)
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
func micros(d time.Duration) int64 { return ceilDiv(d, time.Microsecond) }

// millis is d in whole milliseconds, rounded up.
func millis(d time.Duration) int64 { return ceilDiv(d, time.Millisecond) }

// ceilDiv is d/unit rounded up, for any d: it never overflows.
func ceilDiv(d, unit time.Duration) int64 {
	q := d / unit
	if d%unit > 0 {
		q++
	}
	return int64(q)
}

// fromMicros is us microseconds as a Duration, saturated at the limits of
// Duration.
func fromMicros(us int64) time.Duration {
	switch {
	case us > math.MaxInt64/int64(time.Microsecond):
		return math.MaxInt64
	case us < math.MinInt64/int64(time.Microsecond):
		return math.MinInt64
	}
	return time.Duration(us) * time.Microsecond
}
