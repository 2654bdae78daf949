package mysqllease

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/clock"
	"github.com/leaderaware/leaderaware/internal/fanout"
)

// Store is an [elector.Store] on one MySQL or MariaDB lease table, which
// reads and renews leases in bulk ([elector.BulkReader],
// [elector.BatchRenewer]), reports acquires and releases
// ([elector.Notifier]) and offers fenced writes ([Store.Fenced]). Close it
// when done.
type Store struct {
	clockCarrier // the clock of its written_at stamps and its electors

	leases *leasePool
	jobs   *sql.DB // fenced writes; Open's own, or New's caller's
	owns   bool    // Open made jobs, and Close closes it
	opts   options

	table, versionTable string // quoted
	database            string // the DSN's database, for errors
	target              string // user@net(addr)/db, for errors
	secret              string // the password, masked in every error
	mariaDB             bool   // the server is MariaDB (max_statement_time)

	sqlRead, sqlInsert, sqlTake, sqlRenew, sqlRelease, sqlFence string
	sqlGetMany                                                  string // ends in "IN (": the names follow
	sqlMark                                                     string

	changes *fanout.Source // Notify's callers and the poll that wakes them

	closed    atomic.Bool
	closeOnce sync.Once
}

var _ interface {
	elector.Store
	elector.BulkReader
	elector.BatchRenewer
	elector.Notifier
} = (*Store)(nil)

// nowMicros is the server's UTC clock in microseconds since the Unix epoch,
// whatever the session time zone. Within one statement it is one instant.
const nowMicros = `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))`

// writtenAt is the DATETIME(6) of the parameter, microseconds since the
// Unix epoch in UTC, whatever the session time zone: the inverse of the
// TIMESTAMPDIFF that leaseColumns read written_at with.
const writtenAt = `TIMESTAMPADD(MICROSECOND, ?, '1970-01-01 00:00:00')`

// leaseColumns are the columns of a lease row that scanLease scans.
const leaseColumns = `name, holder, token, version, ttl_us, released, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', written_at)`

// prepareSQL builds the statements (see How it works in the package
// documentation). The table has no AUTO_INCREMENT column to compete for
// LAST_INSERT_ID.
func (s *Store) prepareSQL() {
	t := s.table
	s.sqlRead = `SELECT ` + leaseColumns + ` FROM ` + t + ` WHERE name = ?`
	s.sqlGetMany = `SELECT ` + leaseColumns + ` FROM ` + t + ` WHERE name IN (`
	// Every acquire raises a row's token, and every release sets a flag
	// without touching the tokens, so between two reads any acquire or
	// release moves the mark; renewals do not. It scans the table: cheap
	// up to many thousands of leases.
	s.sqlMark = `SELECT CONCAT(COALESCE(SUM(token), 0), '/', COALESCE(SUM(released), 0)) FROM ` + t
	// A new row's version is its token.
	s.sqlInsert = `INSERT INTO ` + t + ` (name, holder, token, version, ttl_us, released, written_at)
VALUES (?, ?, LAST_INSERT_ID(` + nowMicros + `), ` + nowMicros + `, ?, FALSE, ` + writtenAt + `)`
	// The compare-and-set is on the exact state the candidate just read:
	// token and version (every write bumps the version), so the new
	// version follows from the read one and the new token (takeVersion).
	// The version is set before the token: its expression then reads the
	// old token whether the server assigns from left to right (MySQL) or
	// all at once (MariaDB's SIMULTANEOUS_ASSIGNMENT).
	s.sqlTake = `UPDATE ` + t + ` SET holder = ?, version = GREATEST(version + 1, token + 1, ` + nowMicros + `),
	token = LAST_INSERT_ID(GREATEST(token + 1, ` + nowMicros + `)),
	ttl_us = ?, released = FALSE, written_at = ` + writtenAt + `
WHERE name = ? AND token = ? AND version = ?`
	s.sqlRenew = `UPDATE ` + t + ` SET version = LAST_INSERT_ID(GREATEST(version + 1, ` + nowMicros + `)), ttl_us = ?, written_at = ` + writtenAt + `
WHERE name = ? AND token = ? AND holder = ? AND NOT released`
	s.sqlRelease = `UPDATE ` + t + ` SET released = TRUE, version = GREATEST(version + 1, ` + nowMicros + `), written_at = ` + writtenAt + `
WHERE name = ? AND token = ? AND holder = ? AND NOT released`
	s.sqlFence = `SELECT token FROM ` + t + `
WHERE name = ? AND token = ? AND holder = ? AND NOT released LOCK IN SHARE MODE`
}

// quote quotes a table name (validated: no backquotes) for SQL.
func quote(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }

// DB returns the pool for the jobs' own queries and [Store.Fenced]: the one
// [Open] made (Close closes it), or the one given to [New].
func (s *Store) DB() *sql.DB { return s.jobs }

// Table returns the quoted name of the lease table, ready to use in SQL.
func (s *Store) Table() string { return s.table }

// acquireAttempts bounds TryAcquire's rounds while the lease changes under it.
const acquireAttempts = 5

// TryAcquire implements [elector.Store]. A takeover waiting for the row
// lock (behind a fenced write) gives up when ctx ends; on MySQL, which
// bounds no UPDATE by time, it may still go through once the lock is free,
// leaving a term that nobody runs until a candidate has watched it for its
// TTL.
func (s *Store) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	if err := s.check(ctx, name, ttl); err != nil {
		return elector.Lease{}, err
	}
	if err := elector.ValidateHolder(holder); err != nil {
		return elector.Lease{}, fmt.Errorf("mysqllease: %w", err)
	}
	var l elector.Lease
	err := s.leases.do(ctx, func(q querier) (err error) {
		l, err = s.acquire(ctx, q, name, holder, ttl, observed)
		return err
	})
	var held *elector.HeldError
	if err != nil && !errors.As(err, &held) {
		return elector.Lease{}, s.opErr("acquire", leasesOf(name), err)
	}
	return l, err
}

func (s *Store) acquire(ctx context.Context, q querier, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	var lastErr error
	for range acquireAttempts {
		cur, released, err := scanLease(q.QueryRowContext(ctx, s.sqlRead, name))
		exists := err == nil
		switch {
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return elector.Lease{}, err
		case exists && !released && !cur.Is(observed):
			return elector.Lease{}, &elector.HeldError{Lease: cur}
		}
		l, won, err := s.take(ctx, q, name, holder, ttl, exists, cur)
		switch {
		case won:
			return l, nil
		case isMySQLError(err, errDupEntry) || isMySQLError(err, errDeadlock):
			lastErr = err // another candidate inserted the row first
		case err != nil:
			return elector.Lease{}, err
		}
		// The lease changed since the read: read it again.
	}
	return elector.Lease{}, errors.Join(fmt.Errorf("the lease changed between read and write %d times in a row", acquireAttempts), lastErr)
}

// take starts holder's term in one statement if the lease is still cur,
// the state just read (no row if !exists), and reports whether it did.
func (s *Store) take(ctx context.Context, q querier, name, holder string, ttl time.Duration, exists bool, cur elector.Lease) (elector.Lease, bool, error) {
	written := s.wallMicros()
	query, args := s.sqlInsert, []any{name, holder, micros(ttl), written}
	if exists {
		query, args = s.sqlTake, []any{holder, micros(ttl), written, name, cur.Token, cur.Version}
	}
	token, err := wrote(q.ExecContext(ctx, s.bounded(ctx, query), args...))
	if isMySQLError(err, errStatementTimeout) {
		err = fmt.Errorf("the server stopped the write at the call's deadline: %w: %w", context.DeadlineExceeded, err)
	}
	if err != nil || token == 0 {
		return elector.Lease{}, false, err
	}
	l := elector.Lease{Name: name, Holder: holder, Token: token, Version: token, TTL: fromMicros(micros(ttl)), Written: time.UnixMicro(written)}
	if exists {
		l.Version = takeVersion(cur.Version, token)
	}
	return l, true, nil
}

// takeVersion is the version that sqlTake writes over version old when it
// issues token: above old and at least the server clock, which token is.
func takeVersion(old, token uint64) uint64 { return max(old+1, token) }

// bounded prefixes query, a write that may wait for a row lock, with the
// time left until ctx's deadline as its max_statement_time on MariaDB, so
// that the server stops waiting when the caller does. MySQL has no such
// bound for writes (max_execution_time bounds SELECTs only).
func (s *Store) bounded(ctx context.Context, query string) string {
	deadline, ok := ctx.Deadline()
	if !ok || !s.mariaDB {
		return query
	}
	left := min(max(time.Until(deadline), time.Microsecond), maxStatementTime)
	return "SET STATEMENT max_statement_time = " + strconv.FormatFloat(left.Seconds(), 'f', 6, 64) + " FOR " + query
}

// maxStatementTime is the longest max_statement_time MariaDB accepts.
const maxStatementTime = 31536000 * time.Second

// Renew implements [elector.Store].
func (s *Store) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	if err := s.check(ctx, l.Name, ttl); err != nil {
		return elector.Lease{}, err
	}
	written := s.wallMicros()
	version, err := wrote(s.exec(ctx, s.sqlRenew, micros(ttl), written, l.Name, l.Token, l.Holder))
	switch {
	case err != nil:
		return elector.Lease{}, s.opErr("renew", leasesOf(l.Name), err)
	case version == 0:
		return elector.Lease{}, fmt.Errorf("mysqllease: renew lease %q token %d of %q: %w", l.Name, l.Token, l.Holder, elector.ErrLeaseLost)
	}
	return renewed(l, ttl, version, written), nil
}

// renewed is term l renewed for ttl to version, written at written.
func renewed(l elector.Lease, ttl time.Duration, version uint64, written int64) elector.Lease {
	l.Version, l.TTL, l.Written = version, fromMicros(micros(ttl)), time.UnixMicro(written)
	return l
}

// Release implements [elector.Store]; the row and its token stay.
func (s *Store) Release(ctx context.Context, l elector.Lease) error {
	if err := s.check(ctx, l.Name, elector.MinTTL); err != nil {
		return err
	}
	if _, err := s.exec(ctx, s.sqlRelease, s.wallMicros(), l.Name, l.Token, l.Holder); err != nil {
		return s.opErr("release", leasesOf(l.Name), err)
	}
	return nil
}

// Get implements [elector.Store].
func (s *Store) Get(ctx context.Context, name string) (elector.Lease, error) {
	ls, err := s.GetMany(ctx, []string{name})
	switch {
	case err != nil:
		return elector.Lease{}, err
	case ls[0].Token == 0:
		return elector.Lease{}, fmt.Errorf("mysqllease: lease %q: %w", name, elector.ErrNoLease)
	}
	return ls[0], nil
}

// scanLease scans a lease row, released or not, selected as leaseColumns
// from a *sql.Row or *sql.Rows.
func scanLease(row interface{ Scan(dest ...any) error }) (l elector.Lease, released bool, err error) {
	var ttlUS uint64
	var writtenUS int64
	err = row.Scan(&l.Name, &l.Holder, &l.Token, &l.Version, &ttlUS, &released, &writtenUS)
	l.TTL, l.Written = fromMicros(ttlUS), time.UnixMicro(writtenUS)
	return l, released, err
}

// check validates what every operation gets.
func (s *Store) check(ctx context.Context, name string, ttl time.Duration) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := cmp.Or(elector.ValidateName(name), elector.ValidateTTL(ttl)); err != nil {
		return fmt.Errorf("mysqllease: %w", err)
	}
	return nil
}

// opErr wraps err of operation op on what (see leasesOf).
func (s *Store) opErr(op, what string, err error) error {
	err = withoutSecret(err, s.secret)
	if s.closed.Load() {
		return fmt.Errorf("mysqllease: %s %s: %w (%v)", op, what, ErrClosed, err)
	}
	return fmt.Errorf("mysqllease: %s %s in %s on %s: %w", op, what, s.table, s.target, err)
}

// exec runs one lease write.
func (s *Store) exec(ctx context.Context, query string, args ...any) (res sql.Result, err error) {
	err = s.leases.do(ctx, func(q querier) error {
		res, err = q.ExecContext(ctx, query, args...)
		return err
	})
	return res, err
}

func affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// wrote returns what a lease write gave LAST_INSERT_ID, or 0 if it matched
// no row. A write always changes the row it matches (its version), so
// RowsAffected counts it whether or not the DSN sets clientFoundRows.
func wrote(res sql.Result, err error) (uint64, error) {
	n, err := affected(res, err)
	if err != nil || n == 0 {
		return 0, err
	}
	id, err := res.LastInsertId()
	if err == nil && id == 0 {
		err = errors.New("the server wrote the lease but returned no LAST_INSERT_ID; a proxy between the store and the server may drop it")
	}
	return uint64(id), err
}

// clockCarrier carries a Store's clock to its electors (clock.System; this
// package's tests set another): an alias, so that the embedded field is
// unexported.
type clockCarrier = clock.Carrier

// wallMicros is this process's wall clock in µs since the Unix epoch: written_at.
func (s *Store) wallMicros() int64 { return s.Clock().Wall().UnixMicro() }

// micros is d in whole microseconds, the resolution of ttl_us, rounded up
// so that no TTL is stored shorter than given. It cannot overflow.
func micros(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return uint64((d-1)/time.Microsecond) + 1
}

// fromMicros is us microseconds as a Duration, saturating instead of wrapping.
func fromMicros(us uint64) time.Duration {
	if us > math.MaxInt64/uint64(time.Microsecond) {
		return math.MaxInt64
	}
	return time.Duration(us) * time.Microsecond
}
