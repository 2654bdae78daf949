package mysqllease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
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
	jobConn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysqllease: DSN for %s: %w", target(cfg), withoutSecret(err, cfg.Passwd))
	}
	leaseCfg := cfg.Clone()
	withAutocommit(leaseCfg)
	leaseCfg.InterpolateParams = true
	leaseConn, err := mysql.NewConnector(leaseCfg)
	if err != nil { // a collation that interpolation cannot escape safely
		leaseCfg.InterpolateParams = false
		if leaseConn, err = mysql.NewConnector(leaseCfg); err != nil {
			return nil, fmt.Errorf("mysqllease: DSN for %s: %w", target(cfg), withoutSecret(err, cfg.Passwd))
		}
	}
	leaseDB := sql.OpenDB(leaseConn)
	leaseDB.SetMaxOpenConns(o.leaseConns)
	leaseDB.SetMaxIdleConns(o.leaseConns)
	leaseDB.SetConnMaxLifetime(5 * time.Minute)
	jobs := sql.OpenDB(jobConn)
	s, err := newStore(ctx, newLeasePool(leaseDB, false, o.leaseConns), jobs, true, o, target(cfg), cfg.Passwd)
	if err != nil {
		_ = leaseDB.Close()
		_ = jobs.Close()
		return nil, err
	}
	return s, nil
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
	p := newLeasePool(db, true, o.leaseConns)
	s, err := newStore(ctx, p, db, false, o, "", "")
	if err != nil {
		_ = p.close()
		return nil, err
	}
	return s, nil
}

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
	switch {
	case err == nil:
		return s, nil
	case isMySQLError(err, errAccessDenied) || isMySQLError(err, errAccessDeniedDB):
		return nil, fmt.Errorf("mysqllease: connect to %s: check the user and password: %w", target, withoutSecret(err, secret))
	case isMySQLError(err, errUnknownDB):
		return nil, fmt.Errorf("mysqllease: connect to %s: the database does not exist; create it first: %w", target, withoutSecret(err, secret))
	case errors.Is(err, mysql.ErrInvalidConn):
		return nil, fmt.Errorf("mysqllease: connect to %s: the connection broke or the server did not answer within the DSN's readTimeout: %w",
			target, withoutSecret(err, secret))
	case isConnError(err):
		return nil, fmt.Errorf("mysqllease: connect to %s: %w", target, withoutSecret(err, secret))
	default:
		return nil, fmt.Errorf("mysqllease: open %s: %w", target, withoutSecret(err, secret))
	}
}

// parseDSN parses dsn and sets the default timeouts it leaves unset. Its
// errors never contain the password.
func parseDSN(dsn string) (cfg *mysql.Config, err error) {
	if strings.TrimSpace(dsn) == "" {
		return nil, errors.New("mysqllease: DSN is empty; want user:password@tcp(host:3306)/dbname")
	}
	defer func() { // go-sql-driver panics on some parameters (strict)
		if r := recover(); r != nil {
			cfg, err = nil, fmt.Errorf("mysqllease: parse DSN: %v", r)
		}
	}()
	cfg, err = mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysqllease: parse DSN: %w", withoutSecret(err, passwordOf(dsn)))
	}
	if cfg.DBName == "" {
		return nil, fmt.Errorf("mysqllease: DSN for %s names no database; add one after the slash: user:password@tcp(host:3306)/dbname", target(cfg))
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
// or always fail, before the schema check writes anything: autocommit off,
// a read-only transaction mode, or a read-only server (a replica).
// tx_read_only is transaction_read_only in MySQL 8 and MariaDB 11.1.
func checkSession(ctx context.Context, q querier) error {
	rows, err := q.QueryContext(ctx, `SHOW SESSION VARIABLES WHERE Variable_name IN
		('autocommit', 'tx_read_only', 'transaction_read_only', 'read_only', 'super_read_only')`)
	if err != nil {
		return fmt.Errorf("read the session settings: %w", err)
	}
	defer rows.Close()
	on := make(map[string]bool)
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return fmt.Errorf("read the session settings: %w", err)
		}
		on[strings.ToLower(name)] = value == "ON" || value == "1"
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the session settings: %w", err)
	}
	if autocommit, ok := on["autocommit"]; ok && !autocommit {
		return errors.New("the lease connections have autocommit off (autocommit=0 in the DSN of the *sql.DB given to New, " +
			"or the server's init_connect), so lease writes would never commit: set autocommit=1 in the DSN, " +
			"or use Open, which turns autocommit on for its lease connections")
	}
	for _, v := range []string{"tx_read_only", "transaction_read_only"} {
		if on[v] {
			return fmt.Errorf("the session is read-only (%s is on, in the DSN or the server's defaults), so every lease write would fail: "+
				"remove %s=1 from the DSN, or connect to a writable server", v, v)
		}
	}
	for _, v := range []string{"read_only", "super_read_only"} {
		if on[v] {
			return fmt.Errorf("the server is read-only (%s is on: a replica?), so every lease write would fail: connect to the primary", v)
		}
	}
	return nil
}

// dsnParams returns the names of the parameters dsn sets, as the driver
// finds them: after the first '?' that follows the last '/'.
func dsnParams(dsn string) map[string]bool {
	set := make(map[string]bool)
	slash := strings.LastIndexByte(dsn, '/')
	_, query, ok := strings.Cut(dsn[slash+1:], "?")
	if !ok {
		return set
	}
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
		err = s.leases.close()
		if s.owns {
			err = errors.Join(err, s.jobs.Close())
		}
	})
	return err
}
