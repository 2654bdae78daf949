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
	"github.com/leaderaware/leaderaware/internal/fanout"
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

	changes *fanout.Source // Notify's callers, this Store's releases and the listener
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
	got, err := s.leasesByName(ctx, s.stmts.RenewMany, names, holders, tokens, ttls)
	if err != nil {
		return nil, s.opErr(batchOp("renew", n), names[0], err)
	}
	out := make([]elector.Lease, n)
	for i, l := range terms {
		if r, ok := got[l.Name]; ok && r.Token == l.Token {
			out[i] = r
		}
	}
	for i, l := range terms {
		if out[i].Token != 0 {
			continue
		}
		// Lost, or its row locked: Renew tells which, waiting for the lock.
		r, err := s.Renew(ctx, l, l.TTL)
		switch {
		case err == nil:
			out[i] = r
		case !errors.Is(err, elector.ErrLeaseLost):
			return out, err // with the terms renewed so far
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
		s.changes.Send(freed(l.Name))
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	default:
		return s.opErr("release", l.Name, err)
	}
}

// Get implements [elector.Store].
func (s *Store) Get(ctx context.Context, name string) (elector.Lease, error) {
	ls, err := s.GetMany(ctx, []string{name})
	switch {
	case err != nil:
		return elector.Lease{}, err
	case ls[0].Token == 0:
		return elector.Lease{}, fmt.Errorf("pglease: lease %q: %w", name, elector.ErrNoLease)
	}
	return ls[0], nil
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
	found, err := s.leasesByName(ctx, s.stmts.GetMany, names)
	if err != nil {
		return nil, s.opErr(batchOp("get", len(names)), names[0], err)
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
	var r leaseRow
	dest := r.dest()
	if withWon {
		dest = append([]any{&won}, dest...)
	}
	err = s.queryRow(ctx, idempotent, sql, args, dest...)
	return r.lease(name), won, err
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

// leasesByName runs one idempotent statement on the lease pool whose rows
// are name, holder, token, version, ttl_us and written_at, trying once more
// as retry says.
func (s *Store) leasesByName(ctx context.Context, sql string, args ...any) (map[string]elector.Lease, error) {
	run := func() (map[string]elector.Lease, error) {
		rows, err := s.leases.Query(ctx, sql, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		found := make(map[string]elector.Lease)
		for rows.Next() {
			var name string
			var r leaseRow
			if err := rows.Scan(append([]any{&name}, r.dest()...)...); err != nil {
				return nil, err
			}
			found[name] = r.lease(name)
		}
		return found, rows.Err()
	}
	found, err := run()
	if s.retry(ctx, err, true) {
		found, err = run()
	}
	return found, err
}

// leaseRow is what the lease statements return of a row.
type leaseRow struct {
	holder                string
	token, version, ttlUS int64
	written               time.Time
}

func (r *leaseRow) dest() []any {
	return []any{&r.holder, &r.token, &r.version, &r.ttlUS, &r.written}
}

func (r *leaseRow) lease(name string) elector.Lease {
	return elector.Lease{Name: name, Holder: r.holder, Token: uint64(r.token), Version: uint64(r.version), TTL: fromMicros(r.ttlUS), Written: r.written}
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

// batchOp names an operation on n leases, for opErr with the first name.
func batchOp(op string, n int) string {
	if n == 1 {
		return op
	}
	return fmt.Sprintf("%s %d leases, the first", op, n)
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
