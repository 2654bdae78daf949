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
	"github.com/leaderaware/leaderaware/internal/pgsql"
)

// Store is an [elector.Store] on one PostgreSQL lease table, with the
// core's optional interfaces: [elector.BulkReader], [elector.BatchRenewer]
// and [elector.Notifier] (releases, heard through LISTEN). A Store is safe
// for concurrent use. Close it when done.
type Store struct {
	pool, leases        *pgxpool.Pool // for jobs and fenced writes (Pool); for lease operations
	ownsPool            bool
	opts                options
	schema              string // unquoted
	table, versionTable string // quoted and schema-qualified
	channel             string // the NOTIFY channel, unquoted
	target              string // host, port, database and user, for errors
	secrets             []string
	stmts               pgsql.Statements
	listenKeepAlive     time.Duration // shorter in tests

	closed    atomic.Bool
	closeOnce sync.Once
	pooled    atomic.Bool // lease connections use cache_describe (see usePoolerMode)

	mu       sync.Mutex
	subs     map[*subscriber]struct{} // of Notify
	listener *listener                // runs while subs is not empty
}

var _ interface {
	elector.Store
	elector.BulkReader
	elector.BatchRenewer
	elector.Notifier
} = (*Store)(nil)

// Pool returns the pool for fenced writes and the jobs' other work: the
// one [Open] made (closed by [Store.Close]), or the one given to [New].
// Lease operations never use it.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Table returns the quoted, schema-qualified name of the lease table.
func (s *Store) Table() string { return s.table }

// acquireAttempts bounds TryAcquire's reads of a lease that keeps changing.
const acquireAttempts = 5

// TryAcquire implements [elector.Store].
func (s *Store) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	if err := s.check(name, ttl); err != nil {
		return elector.Lease{}, err
	}
	if err := elector.ValidateHolder(holder); err != nil {
		return elector.Lease{}, fmt.Errorf("pglease: %w", err)
	}
	// Unprepared, in one round trip: it runs once per term.
	args := []any{pgx.QueryExecModeExec, name, holder, micros(ttl), int64(observed.Token), int64(observed.Version)}
	for range acquireAttempts {
		if observed.Token == 0 { // a waiting candidate: answer a held lease from a plain read
			l, _, err := s.scanLease(ctx, true, name, s.stmts.Get, []any{name}, false)
			switch {
			case err == nil:
				return elector.Lease{}, &elector.HeldError{Lease: l}
			case !errors.Is(err, pgx.ErrNoRows):
				return elector.Lease{}, s.opErr("acquire", name, err)
			}
		}
		l, won, err := s.scanLease(ctx, false, name, s.stmts.Acquire, args, true)
		switch {
		case err == nil && won:
			return l, nil
		case err == nil:
			return elector.Lease{}, &elector.HeldError{Lease: l}
		case !errors.Is(err, pgx.ErrNoRows):
			return elector.Lease{}, s.opErr("acquire", name, err)
		}
		// The row changed between the statement's read and its write.
	}
	return elector.Lease{}, fmt.Errorf("pglease: acquire lease %q: it changed %d times during the call; try again", name, acquireAttempts)
}

// Renew implements [elector.Store].
func (s *Store) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	if err := s.check(l.Name, ttl); err != nil {
		return elector.Lease{}, err
	}
	var version, ttlUS int64
	r := l
	err := s.queryRow(ctx, true, s.stmts.Renew, []any{l.Name, l.Holder, int64(l.Token), micros(ttl)}, &version, &ttlUS, &r.Written)
	switch {
	case err == nil:
		r.Version, r.TTL = uint64(version), fromMicros(ttlUS)
		return r, nil
	case errors.Is(err, pgx.ErrNoRows):
		return elector.Lease{}, fmt.Errorf("pglease: renew lease %q token %d of %q: %w", l.Name, l.Token, l.Holder, elector.ErrLeaseLost)
	default:
		return elector.Lease{}, s.opErr("renew", l.Name, err)
	}
}

// RenewMany implements [elector.BatchRenewer].
func (s *Store) RenewMany(ctx context.Context, terms []elector.Lease) ([]elector.Lease, error) {
	n := len(terms)
	names, holders, tokens, ttls := make([]string, n), make([]string, n), make([]int64, n), make([]int64, n)
	for i, l := range terms {
		if err := s.check(l.Name, l.TTL); err != nil {
			return nil, err
		}
		names[i], holders[i], tokens[i], ttls[i] = l.Name, l.Holder, int64(l.Token), micros(l.TTL)
	}
	if n == 0 {
		return nil, nil
	}
	renewed, err := s.queryLeases(ctx, s.stmts.RenewMany, []any{names, holders, tokens, ttls}, false)
	if err != nil {
		return nil, s.opErr(fmt.Sprintf("renew %d leases, the first", n), names[0], err)
	}
	got := make(map[string]elector.Lease, len(renewed))
	for _, l := range renewed {
		got[l.Name] = l
	}
	out := make([]elector.Lease, n)
	for i, l := range terms {
		r, ok := got[l.Name]
		if ok && r.Token == l.Token {
			r.Holder = l.Holder
			out[i] = r
			continue
		}
		// Lost, or its row locked: Renew tells which, waiting for the lock.
		r, err := s.Renew(ctx, l, l.TTL)
		switch {
		case err == nil:
			out[i] = r
		case !errors.Is(err, elector.ErrLeaseLost):
			return nil, err
		}
	}
	return out, nil
}

// Release implements [elector.Store]. It sends a NOTIFY on the store's
// channel with the lease name as payload.
func (s *Store) Release(ctx context.Context, l elector.Lease) error {
	if err := s.check(l.Name, time.Second); err != nil {
		return err
	}
	var released string
	err := s.queryRow(ctx, true, s.stmts.Release, []any{l.Name, l.Holder, int64(l.Token), s.channel}, &released)
	switch {
	case err == nil:
		s.notify(freed(l.Name))
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	default:
		return s.opErr("release", l.Name, err)
	}
}

// Get implements [elector.Store].
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

// GetMany implements [elector.BulkReader].
func (s *Store) GetMany(ctx context.Context, names []string) ([]elector.Lease, error) {
	for _, name := range names {
		if err := s.check(name, time.Second); err != nil {
			return nil, err
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	held, err := s.queryLeases(ctx, s.stmts.GetMany, []any{names}, true)
	if err != nil {
		return nil, s.opErr(fmt.Sprintf("read %d leases, the first", len(names)), names[0], err)
	}
	found := make(map[string]elector.Lease, len(held))
	for _, l := range held {
		found[l.Name] = l
	}
	out := make([]elector.Lease, len(names))
	for i, name := range names {
		out[i] = found[name]
		out[i].Name = name
	}
	return out, nil
}

// scanLease runs a statement whose row is [won,] holder, token, version,
// ttl_us and written_at.
func (s *Store) scanLease(ctx context.Context, idempotent bool, name, sql string, args []any, withWon bool) (l elector.Lease, won bool, err error) {
	var token, version, ttlUS int64
	l.Name = name
	dest := []any{&won, &l.Holder, &token, &version, &ttlUS, &l.Written}
	if !withWon {
		dest = dest[1:]
	}
	err = s.queryRow(ctx, idempotent, sql, args, dest...)
	l.Token, l.Version, l.TTL = uint64(token), uint64(version), fromMicros(ttlUS)
	return l, won, err
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

// queryRow runs one statement on the lease pool and scans its row, trying
// once more as retry says.
func (s *Store) queryRow(ctx context.Context, idempotent bool, sql string, args []any, dest ...any) error {
	err := s.leases.QueryRow(ctx, sql, args...).Scan(dest...)
	if s.retry(ctx, err, idempotent) {
		err = s.leases.QueryRow(ctx, sql, args...).Scan(dest...)
	}
	return err
}

// queryLeases runs one idempotent statement on the lease pool and scans
// its rows ([holder without it]), trying once more as retry says.
func (s *Store) queryLeases(ctx context.Context, sql string, args []any, withHolder bool) ([]elector.Lease, error) {
	run := func() ([]elector.Lease, error) {
		rows, err := s.leases.Query(ctx, sql, args...)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, func(row pgx.CollectableRow) (l elector.Lease, err error) {
			var token, version, ttlUS int64
			if withHolder {
				err = row.Scan(&l.Name, &l.Holder, &token, &version, &ttlUS, &l.Written)
			} else {
				err = row.Scan(&l.Name, &token, &version, &ttlUS, &l.Written)
			}
			l.Token, l.Version, l.TTL = uint64(token), uint64(version), fromMicros(ttlUS)
			return l, err
		})
	}
	ls, err := run()
	if s.retry(ctx, err, true) {
		ls, err = run()
	}
	return ls, err
}

// retry reports whether a statement that failed with err should run once
// more, on a fresh connection: if it never reached the server, if it may
// run twice (idempotent) and the connection broke, or after a transaction
// pooler's error, once usePoolerMode has switched the pool.
func (s *Store) retry(ctx context.Context, err error, idempotent bool) bool {
	return err != nil && ctx.Err() == nil && !s.closed.Load() &&
		(pgconn.SafeToRetry(err) || idempotent && connectionLost(err) || s.usePoolerMode(err))
}

// usePoolerMode reports whether err is a transaction pooler's (see
// isPoolerError); the first switches the lease pool to cache_describe for
// good, closing its connections.
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
// statement: a network error, or the server ending the session (57P).
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

// micros and millis round d up, so that a positive TTL never becomes zero.
func micros(d time.Duration) int64 { return ceilDiv(d, time.Microsecond) }
func millis(d time.Duration) int64 { return ceilDiv(d, time.Millisecond) }

// ceilDiv is d/unit rounded up; it never overflows.
func ceilDiv(d, unit time.Duration) int64 {
	q := d / unit
	if d%unit > 0 {
		q++
	}
	return int64(q)
}

// fromMicros is us microseconds as a Duration, saturated.
func fromMicros(us int64) time.Duration {
	switch {
	case us > math.MaxInt64/int64(time.Microsecond):
		return math.MaxInt64
	case us < math.MinInt64/int64(time.Microsecond):
		return math.MinInt64
	}
	return time.Duration(us) * time.Microsecond
}
