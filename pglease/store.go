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
	"github.com/leaderaware/leaderaware/internal/pgsql"
)

// Store is an [elector.Store] on one PostgreSQL lease table. It never
// compares timestamps: a lease row records its holder's TTL and a version
// that every write bumps, and candidates measure leases on their own clocks.
// Every lease operation is one autocommit statement (a waiting candidate's
// TryAcquire of a free lease: two); nothing the leases depend on lives in
// the session (no session-level advisory locks), so a Store survives
// reconnects and pool recycling.
//
// Store also implements [elector.LeaseWatcher]: one goroutine per Store
// reads every lease its candidates wait on in one statement per poll (see
// [Store.WatchLease]). It implements [elector.ReleaseWatcher] too: Release
// sends a NOTIFY, and one listener connection per Store wakes the candidates
// waiting in any process (see [Store.WatchRelease]).
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

	stmts pgsql.Statements // on table

	// listenKeepAlive is the listener's keepAlive: listenKeepAlive, shorter
	// in tests.
	listenKeepAlive time.Duration

	closed    atomic.Bool
	closeOnce sync.Once
	// pooled is set when a statement failed the way named prepared
	// statements fail behind a transaction pooler: lease connections made
	// since then cache descriptions instead (see usePoolerMode).
	pooled atomic.Bool

	mu       sync.Mutex
	watchers map[string]map[chan struct{}]struct{} // by lease name
	listener *listener                             // started by the first WatchRelease or WatchLease
	stamps   map[string]stamp                      // by lease name, for fenced writes

	leaseWatch leaseWatch // the WatchLease goroutine and its watchers
	renewals   renewals   // Renew's group commit and its batcher goroutine
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
	elector.LeaseWatcher
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

// prepareSQL sets the statements on the store's table.
func (s *Store) prepareSQL() { s.stmts = pgsql.For(s.table) }

// acquireAttempts bounds how often TryAcquire looks at the lease again
// when it changes between a read and the compare-and-set.
const acquireAttempts = 5

// TryAcquire implements [elector.Store]. Without an observed lease (the
// call of a waiting candidate) it first reads the lease with a plain
// SELECT, the statement of Get, and answers a held lease from that read,
// without a write or a row lock. A free lease (no row, or released), or an
// observed one, it takes with one statement that reads the lease again and
// takes it with a compare-and-set if it is still free or observed, and
// otherwise answers from that read; so a takeover is one round trip. The
// new token is larger than the last one and than the server's clock in
// microseconds, so tokens keep growing even after the lease rows are
// deleted. A takeover waits for a fenced write in progress on the lease
// (see [Store.FencedLease]).
func (s *Store) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	if err := s.check(name, ttl); err != nil {
		return elector.Lease{}, err
	}
	if err := elector.ValidateHolder(holder); err != nil {
		return elector.Lease{}, fmt.Errorf("pglease: %w", err)
	}
	var args []any // of the compare-and-set, made when it first runs
	for range acquireAttempts {
		if observed.Token == 0 {
			l, _, err := s.scanLease(ctx, true, name, s.stmts.Get, []any{name}, false)
			switch {
			case err == nil:
				return elector.Lease{}, &elector.HeldError{Lease: l}
			case !errors.Is(err, pgx.ErrNoRows):
				return elector.Lease{}, s.opErr("acquire", name, err)
			}
			// Free: take it.
		}
		if args == nil {
			// A connection seldom has the compare-and-set prepared: it runs
			// once per term. Run it unprepared, in one round trip, rather
			// than pay one more to prepare it when the network is slow and
			// the trust window has no round trip to spare.
			args = []any{pgx.QueryExecModeExec, name, holder, micros(ttl), int64(observed.Token), int64(observed.Version)}
		}
		start := clock.Now()
		l, won, err := s.scanLease(ctx, false, name, s.stmts.Acquire, args, true)
		switch {
		case err == nil && won:
			s.stamp(l, start)
			return l, nil
		case err == nil:
			return elector.Lease{}, &elector.HeldError{Lease: l}
		case !errors.Is(err, pgx.ErrNoRows):
			return elector.Lease{}, s.opErr("acquire", name, err)
		}
		// The lease changed between the statement's read and its
		// compare-and-set: look again.
	}
	return elector.Lease{}, fmt.Errorf("pglease: acquire lease %q: it changed %d times during the call; try again", name, acquireAttempts)
}

// Renew implements [elector.Store]. One UPDATE records ttl and bumps the
// version if l (name, holder and token) is still the current, unreleased
// term; otherwise it returns an error wrapping [elector.ErrLeaseLost], and
// nothing changes. Renewals that arrive while another of this Store is in
// flight go to the server together, in one statement, when it ends.
func (s *Store) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	if err := s.check(l.Name, ttl); err != nil {
		return elector.Lease{}, err
	}
	start := clock.Now()
	row := s.renewRow(ctx, l, micros(ttl))
	switch err := row.err; {
	case err == nil:
		r := l
		r.Version, r.TTL, r.Written = uint64(row.version), fromMicros(row.ttlUS), row.written
		s.stamp(r, start)
		return r, nil
	case errors.Is(err, pgx.ErrNoRows):
		return elector.Lease{}, fmt.Errorf("pglease: renew lease %q token %d of %q: %w", l.Name, l.Token, l.Holder, elector.ErrLeaseLost)
	case errors.Is(err, ErrClosed):
		return elector.Lease{}, ErrClosed
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
	err := s.queryRow(ctx, true, s.stmts.Release, []any{l.Name, l.Holder, int64(l.Token), s.channel}, &released)
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
	l, _, err := s.scanLease(ctx, true, name, s.stmts.Get, []any{name}, false)
	switch {
	case err == nil:
		return l, nil
	case errors.Is(err, pgx.ErrNoRows):
		return elector.Lease{}, fmt.Errorf("pglease: lease %q: %w", name, elector.ErrNoLease)
	default:
		return elector.Lease{}, s.opErr("get", name, err)
	}
}

// scanLease runs a statement whose row is holder, token, version, ttl_us
// and written_at, after won if withWon (the Acquire statement). The
// columns and the destinations pgx scans them into share one allocation.
func (s *Store) scanLease(ctx context.Context, idempotent bool, name, sql string, args []any, withWon bool) (l elector.Lease, won bool, err error) {
	var r struct {
		won                   bool
		holder                string
		token, version, ttlUS int64
		written               time.Time
		dest                  [6]any
	}
	r.dest = [6]any{&r.won, &r.holder, &r.token, &r.version, &r.ttlUS, &r.written}
	dest := r.dest[1:]
	if withWon {
		dest = r.dest[:]
	}
	err = s.queryRow(ctx, idempotent, sql, args, dest...)
	l = elector.Lease{Name: name, Holder: r.holder, Token: uint64(r.token), Version: uint64(r.version), TTL: fromMicros(r.ttlUS), Written: r.written}
	return l, r.won, err
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
	if s.retry(ctx, err, idempotent) {
		err = s.leases.QueryRow(ctx, sql, args...).Scan(dest...)
	}
	return err
}

// retry reports whether a lease statement that failed with err should be
// tried once more, as queryRow says; and also after a transaction pooler's
// error, which happens before the statement runs, once usePoolerMode has
// switched the lease pool.
func (s *Store) retry(ctx context.Context, err error, idempotent bool) bool {
	return err != nil && ctx.Err() == nil && !s.closed.Load() &&
		(pgconn.SafeToRetry(err) || idempotent && connectionLost(err) || s.usePoolerMode(err))
}

// usePoolerMode reports whether err is the error of a named prepared
// statement behind a transaction pooler such as PgBouncer, which gives each
// transaction whichever server connection is free: the statement this
// connection prepared is missing there (26000), or another client's of the
// same name is there already (42P05). The first such error switches the
// lease pool for good to pgx's cache_describe mode, which prepares no named
// statements, at the cost of a parse on the server per statement: it
// closes the pool's connections, and those it makes from then on use that
// mode. Until then, lease statements keep pgx's faster default.
func (s *Store) usePoolerMode(err error) bool {
	if !isPoolerError(err) {
		return false
	}
	if s.pooled.CompareAndSwap(false, true) {
		s.opts.logger.Info("pglease: a transaction pooler is between the store and the server: lease statements "+
			"no longer use named prepared statements; set default_query_exec_mode=cache_describe in the DSN "+
			"for fenced writes and your own queries", "err", withoutSecrets(err, s.secrets...))
		s.leases.Reset()
	}
	return true
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
	err = poolerHint(withoutSecrets(err, s.secrets...))
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
