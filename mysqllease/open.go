package mysqllease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leaderaware/leaderaware/internal/fanout"
)

// Connection timeouts that [Open] sets when the DSN does not, so that a dead
// or silent server fails a call instead of hanging it. A DSN that sets one
// (readTimeout=0 turns that one off) keeps its own.
const (
	DefaultDialTimeout  = 10 * time.Second // the DSN's timeout
	DefaultReadTimeout  = 30 * time.Second // readTimeout: no statement of the store or the jobs waits longer for a reply
	DefaultWriteTimeout = 30 * time.Second // writeTimeout
)

// NewTimeout bounds the schema check of [New], which takes no context.
const NewTimeout = 30 * time.Second

// Open connects to the MySQL or MariaDB database that dsn names, in the
// go-sql-driver/mysql format (user:password@tcp(host:3306)/dbname?param=value),
// creates the lease table if need be and returns a Store with pools of its
// own, which [Store.Close] closes. The DSN must name a database. Unless it
// sets them, Open sets timeout [DefaultDialTimeout], readTimeout
// [DefaultReadTimeout] and writeTimeout [DefaultWriteTimeout]; raise
// readTimeout if jobs run longer statements on [Store.DB]. A read-only
// session or server is refused. Errors never contain the password.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	cfg, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	leaseCfg := cfg.Clone()
	withAutocommit(leaseCfg)
	leaseCfg.InterpolateParams = true
	leaseConn, err := mysql.NewConnector(leaseCfg)
	if err != nil { // a collation that interpolation cannot escape safely
		leaseCfg.InterpolateParams = false
		leaseConn, err = mysql.NewConnector(leaseCfg)
	}
	jobConn, jobErr := mysql.NewConnector(cfg)
	if err = errors.Join(err, jobErr); err != nil {
		return nil, fmt.Errorf("mysqllease: DSN for %s: %w", target(cfg), withoutSecret(err, cfg.Passwd))
	}
	leaseDB := sql.OpenDB(leaseConn)
	leaseDB.SetMaxOpenConns(o.leaseConns)
	leaseDB.SetMaxIdleConns(o.leaseConns)
	leaseDB.SetConnMaxLifetime(5 * time.Minute)
	return newStore(ctx, newLeasePool(leaseDB, false, o.leaseConns), sql.OpenDB(jobConn), true, o, target(cfg), cfg.Passwd)
}

// New returns a Store on db, a go-sql-driver/mysql pool that the caller
// keeps ([Store.Close] does not close it), checking or creating the lease
// table like [Open] within [NewTimeout]. The store reserves
// [WithLeaseConns] of db's connections until Close: count them in db's
// SetMaxOpenConns. A pool with autocommit off or a read-only session is
// refused. The DSN's interpolateParams=true saves a round trip per lease
// statement.
func New(db *sql.DB, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, errors.New("mysqllease: New: nil *sql.DB")
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), NewTimeout)
	defer cancel()
	return newStore(ctx, newLeasePool(db, true, o.leaseConns), db, false, o, "", "")
}

// newStore checks the session and the schema, and on failure closes what
// it was given to own.
func newStore(ctx context.Context, leases *leasePool, jobs *sql.DB, owns bool, o options, target, secret string) (*Store, error) {
	s := &Store{
		leases:       leases,
		jobs:         jobs,
		owns:         owns,
		opts:         o,
		table:        quote(o.table),
		versionTable: quote(o.table + versionSuffix),
		target:       target,
		secret:       secret,
	}
	s.changes = fanout.New(s.poll)
	s.prepareSQL()
	err := leases.do(ctx, func(q querier) error {
		if err := checkSession(ctx, q); err != nil {
			return err
		}
		return s.ensureSchema(ctx, q)
	})
	if target == "" { // New
		s.target, target = "database "+s.database, "the database of the *sql.DB given to New"
	}
	if err == nil {
		return s, nil
	}
	_ = s.Close()
	var hint string
	switch {
	case isMySQLError(err, errAccessDenied) || isMySQLError(err, errAccessDeniedDB):
		hint = "check the user and password: "
	case isMySQLError(err, errUnknownDB):
		hint = "the database does not exist; create it first: "
	case errors.Is(err, mysql.ErrInvalidConn):
		hint = "the connection broke or the server did not answer within the DSN's readTimeout: "
	case !isConnError(err):
		return nil, fmt.Errorf("mysqllease: open %s: %w", target, withoutSecret(err, secret))
	}
	return nil, fmt.Errorf("mysqllease: connect to %s: %s%w", target, hint, withoutSecret(err, secret))
}

// dsnForm is the form of a DSN, for the errors of one that is not.
const dsnForm = "user:password@tcp(host:3306)/dbname"

// parseDSN parses dsn and sets the default timeouts it leaves unset. Its
// errors never contain the password.
func parseDSN(dsn string) (cfg *mysql.Config, err error) {
	if strings.TrimSpace(dsn) == "" {
		return nil, errors.New("mysqllease: DSN is empty; want " + dsnForm)
	}
	defer func() { // go-sql-driver panics on some parameters (strict)
		if r := recover(); r != nil {
			cfg, err = nil, malformedDSN(dsn, fmt.Errorf("%v", r))
		}
	}()
	if cfg, err = mysql.ParseDSN(dsn); err != nil {
		return nil, malformedDSN(dsn, err)
	}
	if cfg.DBName == "" {
		return nil, fmt.Errorf("mysqllease: DSN for %s names no database; add one after the slash: %s", target(cfg), dsnForm)
	}
	set := dsnParams(dsn)
	if !set["timeout"] {
		cfg.Timeout = DefaultDialTimeout
	}
	if !set["readTimeout"] {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if !set["writeTimeout"] {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	return cfg, nil
}

// malformedDSN is the error of dsn, which did not parse with err: it shows
// dsn without its password, and the form expected.
func malformedDSN(dsn string, err error) error {
	if pw := passwordOf(dsn); pw != "" {
		dsn, err = strings.ReplaceAll(dsn, ":"+pw+"@", ":xxxxx@"), withoutSecret(err, pw)
	}
	return fmt.Errorf("mysqllease: DSN %q is not of the form %s?param=value: %w", dsn, dsnForm, err)
}

// withAutocommit overrides an autocommit setting of the DSN (autocommit=0,
// a common ORM setting) on the lease connections: each lease statement must
// commit on its own, or other sessions never see it and its row locks stay.
// A DSN without one keeps the server's default, which checkSession checks.
func withAutocommit(cfg *mysql.Config) {
	for k := range cfg.Params {
		if strings.EqualFold(k, "autocommit") {
			cfg.Params[k] = "1"
		}
	}
}

// checkSession refuses a lease connection whose writes would never commit
// or always fail (autocommit off, read-only), before the schema check
// writes anything. tx_read_only is transaction_read_only in MySQL 8 and
// MariaDB 11.1.
func checkSession(ctx context.Context, q querier) error {
	rows, err := q.QueryContext(ctx, `SHOW SESSION VARIABLES WHERE Variable_name IN
		('autocommit', 'tx_read_only', 'transaction_read_only', 'read_only', 'super_read_only')`)
	if err != nil {
		return fmt.Errorf("read the session settings: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return fmt.Errorf("read the session settings: %w", err)
		}
		on := value == "ON" || value == "1"
		switch name = strings.ToLower(name); {
		case name == "autocommit" && !on:
			return errors.New("the lease connections have autocommit off (autocommit=0 in the DSN of the *sql.DB given to New, " +
				"or the server's init_connect), so lease writes would never commit: set autocommit=1 in the DSN, " +
				"or use Open, which turns autocommit on for its lease connections")
		case name != "autocommit" && on:
			return fmt.Errorf("the session or server is read-only (%s is on, in the DSN, the server's defaults or on a replica), "+
				"so every lease write would fail: remove %s=1 from the DSN, or connect to a writable primary", name, name)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the session settings: %w", err)
	}
	return nil
}

// dsnParams returns the names of the parameters dsn sets, as the driver
// finds them: after the first '?' that follows the last '/'.
func dsnParams(dsn string) map[string]bool {
	set := make(map[string]bool)
	_, query, _ := strings.Cut(dsn[strings.LastIndexByte(dsn, '/')+1:], "?")
	for kv := range strings.SplitSeq(query, "&") {
		if k, _, ok := strings.Cut(kv, "="); ok {
			set[k] = true
		}
	}
	return set
}

// passwordOf returns the password in dsn the way the driver finds it, for
// masking the error of a DSN that did not parse.
func passwordOf(dsn string) string {
	slash := strings.LastIndexByte(dsn, '/')
	if slash < 0 {
		slash = len(dsn)
	}
	at := strings.LastIndexByte(dsn[:slash], '@')
	if at < 0 {
		return ""
	}
	_, pw, _ := strings.Cut(dsn[:at], ":")
	return pw
}

// Close gives back the connections reserved from New's pool and closes the
// pools Open made. Operations after Close return [ErrClosed]. Close is
// idempotent.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.changes.Close()
		err = s.leases.close()
		if s.owns {
			err = errors.Join(err, s.jobs.Close())
		}
	})
	return err
}
