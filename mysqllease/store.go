package mysqllease

import (
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
)

// Store is an [elector.Store] on one MySQL or MariaDB lease table. It keeps
// no clock: leases are compare-and-set by token and version, and candidates
// decide expiry on their own clocks (see the elector package). It also
// implements [elector.LeaseWatcher] and [elector.ReleaseWatcher], and offers
// fenced writes ([Store.Fenced]).
//
// A Store is safe for concurrent use. Close it when done.
type Store struct {
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
	sqlWatch                                                    string // ends in "IN (": the names follow

	watch watcher

	closed    atomic.Bool
	closeOnce sync.Once
}

var _ interface {
	elector.Store
	elector.LeaseWatcher
	elector.ReleaseWatcher
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

// prepareSQL builds the statements. Every lease write is one autocommit
// statement: a client that freezes or is cut off holds no lock on a lease
// row while it does not run. What a write made that the caller does not
// know already (the new token of a term, the new version of a renewal)
// comes back in the OK packet as LAST_INSERT_ID(expr), which the driver
// returns as the result's LastInsertId; the table has no AUTO_INCREMENT
// column to compete for it.
func (s *Store) prepareSQL() {
	t := s.table
	s.sqlRead = `SELECT ` + leaseColumns + ` FROM ` + t + ` WHERE name = ?`
	s.sqlWatch = `SELECT ` + leaseColumns + ` FROM ` + t + ` WHERE name IN (`
	// A new row's token is the server's clock in microseconds, and a new
	// term's token is at least that: tokens keep growing after the rows are
	// deleted or the table truncated (see the package documentation).
	// Every write floors the new version at that clock too, so that
	// versions never repeat after the rows were rolled back (a failover to
	// a standby that lagged, a restore). A new row's version is its token.
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
	s.sqlRelease = `UPDATE ` + t + ` SET released = TRUE, version = LAST_INSERT_ID(GREATEST(version + 1, ` + nowMicros + `)), written_at = ` + writtenAt + `
WHERE name = ? AND token = ? AND holder = ? AND NOT released`
	s.sqlFence = `SELECT token FROM ` + t + `
WHERE name = ? AND token = ? AND holder = ? AND NOT released LOCK IN SHARE MODE`
}

// quote quotes a table name (validated: no backquotes) for SQL.
func quote(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }

// DB returns the pool for the jobs' own queries and [Store.Fenced]: the one
// [Open] made (Close closes it), or the one given to [New]. Lease traffic
// never waits for its connections.
func (s *Store) DB() *sql.DB { return s.jobs }

// Table returns the quoted name of the lease table, ready to use in SQL.
func (s *Store) Table() string { return s.table }

// acquireAttempts bounds how often TryAcquire goes round when the lease
// changes between its read and its write.
const acquireAttempts = 5

// TryAcquire implements [elector.Store]. It reads the lease first: a held
// lease that is not observed is refused with a *[elector.HeldError] from
// that plain SELECT, without locks or writes. Otherwise one autocommit
// statement takes it: an UPDATE whose WHERE repeats the compare-and-set on
// the token and version just read (free, or still observed), or an INSERT
// for a new name. If the lease changed in between, the statement changes
// nothing and TryAcquire reads again. The returned lease is the one the
// statement wrote, with no read back: its token comes back as the
// statement's LAST_INSERT_ID, and its version follows from it.
//
// A takeover that waits for the row lock (behind a fenced write) gives up
// when ctx ends; on MariaDB the server gives up with it (the statement
// carries ctx's deadline as max_statement_time), so a candidate that gave
// up does not take the lease later. MySQL bounds no UPDATE by time: there
// the takeover may still go through once the lock is free, and the lease
// then has a term that nobody runs, until a candidate has watched it for
// its TTL.
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
		return elector.Lease{}, s.opErr("acquire", name, err)
	}
	return l, err
}

func (s *Store) acquire(ctx context.Context, q querier, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	var lastErr error
	for range acquireAttempts {
		cur, released, err := s.read(ctx, q, name)
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
	err := fmt.Errorf("the lease changed between read and write %d times in a row", acquireAttempts)
	if lastErr != nil {
		err = fmt.Errorf("%w; last: %w", err, lastErr)
	}
	return elector.Lease{}, err
}

// take starts holder's term in one statement if the lease is still cur,
// the state just read (no row if !exists), and reports whether it did.
func (s *Store) take(ctx context.Context, q querier, name, holder string, ttl time.Duration, exists bool, cur elector.Lease) (elector.Lease, bool, error) {
	l := elector.Lease{Name: name, Holder: holder, TTL: fromMicros(micros(ttl))}
	written := wallMicros()
	var (
		res sql.Result
		err error
	)
	if exists {
		res, err = q.ExecContext(ctx, s.bounded(ctx, s.sqlTake), holder, micros(ttl), written, name, cur.Token, cur.Version)
	} else {
		res, err = q.ExecContext(ctx, s.bounded(ctx, s.sqlInsert), name, holder, micros(ttl), written)
	}
	token, err := wrote(res, err)
	if isMySQLError(err, errStatementTimeout) {
		err = fmt.Errorf("the server stopped the write at the call's deadline: %w: %w", context.DeadlineExceeded, err)
	}
	if err != nil || token == 0 {
		return elector.Lease{}, false, err
	}
	l.Token, l.Version, l.Written = token, token, time.UnixMicro(written)
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

// Renew implements [elector.Store] with one autocommit UPDATE that matches
// name, token and holder of an unreleased lease, bumps the version and
// records ttl; the new version comes back as the statement's
// LAST_INSERT_ID. If no row matched, it returns an error wrapping
// [elector.ErrLeaseLost] and nothing changes.
func (s *Store) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	if err := s.check(ctx, l.Name, ttl); err != nil {
		return elector.Lease{}, err
	}
	written := wallMicros()
	var version uint64
	err := s.leases.do(ctx, func(q querier) (err error) {
		version, err = wrote(q.ExecContext(ctx, s.sqlRenew, micros(ttl), written, l.Name, l.Token, l.Holder))
		return err
	})
	switch {
	case err != nil:
		return elector.Lease{}, s.opErr("renew", l.Name, err)
	case version == 0:
		return elector.Lease{}, fmt.Errorf("mysqllease: renew lease %q token %d of %q: %w", l.Name, l.Token, l.Holder, elector.ErrLeaseLost)
	}
	return elector.Lease{
		Name: l.Name, Holder: l.Holder, Token: l.Token, Version: version,
		TTL: fromMicros(micros(ttl)), Written: time.UnixMicro(written),
	}, nil
}

// Release implements [elector.Store]. One UPDATE marks the lease released
// and bumps its version (the row and its token stay) if l is still the
// current, unreleased term; the watchers of this Store learn it at once,
// those of other Stores at their next poll. Otherwise it changes nothing and
// returns nil.
func (s *Store) Release(ctx context.Context, l elector.Lease) error {
	if err := s.check(ctx, l.Name, time.Second); err != nil {
		return err
	}
	var version, at uint64
	err := s.leases.do(ctx, func(q querier) (err error) {
		version, err = wrote(q.ExecContext(ctx, s.sqlRelease, wallMicros(), l.Name, l.Token, l.Holder))
		at = s.watch.mark()
		return err
	})
	if err != nil {
		return s.opErr("release", l.Name, err)
	}
	if version != 0 {
		s.watch.released(l.Name, leaseState{token: l.Token, version: version, free: true}, at)
	}
	return nil
}

// Get implements [elector.Store]: the unreleased lease of name, or an error
// wrapping [elector.ErrNoLease].
func (s *Store) Get(ctx context.Context, name string) (elector.Lease, error) {
	if err := s.check(ctx, name, time.Second); err != nil {
		return elector.Lease{}, err
	}
	var (
		l        elector.Lease
		released bool
	)
	err := s.leases.do(ctx, func(q querier) (err error) {
		l, released, err = s.read(ctx, q, name)
		return err
	})
	switch {
	case errors.Is(err, sql.ErrNoRows) || err == nil && released:
		return elector.Lease{}, fmt.Errorf("mysqllease: lease %q: %w", name, elector.ErrNoLease)
	case err != nil:
		return elector.Lease{}, s.opErr("get", name, err)
	}
	return l, nil
}

// read reads the row of name, released or not.
func (s *Store) read(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, name string) (elector.Lease, bool, error) {
	return scanLease(q.QueryRowContext(ctx, s.sqlRead, name))
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
	if err := elector.ValidateName(name); err != nil {
		return fmt.Errorf("mysqllease: %w", err)
	}
	if err := elector.ValidateTTL(ttl); err != nil {
		return fmt.Errorf("mysqllease: %w", err)
	}
	return nil
}

func (s *Store) opErr(op, name string, err error) error {
	err = withoutSecret(err, s.secret)
	if s.closed.Load() {
		return fmt.Errorf("mysqllease: %s lease %q: %w (%v)", op, name, ErrClosed, err)
	}
	return fmt.Errorf("mysqllease: %s lease %q in %s on %s: %w", op, name, s.table, s.target, err)
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

// wallMicros is this process's wall clock in microseconds since the Unix
// epoch, the written_at of its writes (for display only).
func wallMicros() int64 { return clock.Wall().UnixMicro() }

// micros is d in whole microseconds, the resolution of ttl_us, rounded up
// so that no TTL is stored shorter than given. It cannot overflow.
func micros(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	us := d / time.Microsecond
	if d%time.Microsecond != 0 {
		us++
	}
	return uint64(us)
}

// fromMicros is us microseconds as a Duration, saturating at the longest
// Duration instead of wrapping.
func fromMicros(us uint64) time.Duration {
	if us > math.MaxInt64/uint64(time.Microsecond) {
		return math.MaxInt64
	}
	return time.Duration(us) * time.Microsecond
}
