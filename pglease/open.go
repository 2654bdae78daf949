package pglease

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leaderaware/leaderaware/internal/fanout"
	"github.com/leaderaware/leaderaware/internal/pgsql"
)

// Connection settings of the pools a Store makes (see How it works).
const (
	defaultConnectTimeout = 10 * time.Second // when the DSN sets no connect_timeout
	pingTimeout           = 2 * time.Second  // the pool's health check of an idle connection
	leaseConns            = 2                // the lease pool's size
)

// Open connects to the server that dsn names (a URL or keyword/value
// string, as pgx parses it), creates or migrates the lease table and
// returns a Store on pools of its own. The DSN must name a database: an
// empty DSN (an unset environment variable) is an error, not a default
// database where another leader may run. A hot standby or a read-only
// session is refused (with several hosts, add
// target_session_attrs=read-write). Errors never contain the password.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	cfg, err := parseDSN(dsn, o)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pglease: open %s: %w", target(&cfg.ConnConfig.Config), withoutSecrets(err, cfg.ConnConfig.Password))
	}
	s, err := newStore(ctx, pool, true, leaseConfig(cfg), o)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// parseDSN parses dsn into a pool configuration with pglease's settings.
func parseDSN(dsn string, o options) (*pgxpool.Config, error) {
	if strings.TrimSpace(dsn) == "" {
		return nil, errors.New("pglease: parse DSN: the DSN is empty (an unset environment variable?); " +
			"give the server and database, e.g. postgres://user@host:5432/dbname")
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, parseError(dsn, err)
	}
	if cfg.ConnConfig.Database == "" {
		return nil, fmt.Errorf("pglease: parse DSN: it names no database (%s); add one, e.g. postgres://user@host:5432/dbname, "+
			"rather than let the server pick a default where another leader may run",
			scrub(target(&cfg.ConnConfig.Config), []string{cfg.ConnConfig.Password}))
	}
	params := cfg.ConnConfig.RuntimeParams
	if o.appName != "" {
		params["application_name"] = o.appName
	} else if params["application_name"] == "" {
		params["application_name"] = DefaultApplicationName
	}
	withTimeouts(cfg)
	return cfg, nil
}

// withTimeouts sets the connect and ping timeouts of cfg where it has none,
// and makes the pool drop a broken connection at once.
func withTimeouts(cfg *pgxpool.Config) {
	if cfg.ConnConfig.ConnectTimeout <= 0 {
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	if cfg.PingTimeout <= 0 {
		cfg.PingTimeout = pingTimeout
	}
	beforeClose := cfg.BeforeClose
	cfg.BeforeClose = func(c *pgx.Conn) {
		if beforeClose != nil {
			beforeClose(c)
		}
		// pgx closes a connection it gave up on in the background, reading
		// for up to 15s; a dead network never answers: close the socket now.
		if c.IsClosed() {
			_ = c.PgConn().Conn().Close()
		}
	}
}

// leaseConfig returns the configuration of the lease pool: cfg's, with
// leaseConns connections at most and none kept idle.
func leaseConfig(cfg *pgxpool.Config) *pgxpool.Config {
	lc := cfg.Copy()
	lc.MaxConns, lc.MinConns, lc.MinIdleConns = leaseConns, 0, 0
	return lc
}

// New is [Open] on pool, which serves [Store.Pool] and which the caller
// keeps open; the Store makes its own lease connections with pool's
// settings.
func New(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("pglease: New: nil pool")
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	cfg := leaseConfig(pool.Config())
	if cfg.ConnConfig.Database == "" {
		return nil, fmt.Errorf("pglease: New: the pool names no database (%s); "+
			"give it one rather than let the server pick a default where another leader may run", target(&cfg.ConnConfig.Config))
	}
	if o.appName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = o.appName
	}
	withTimeouts(cfg)
	return newStore(ctx, pool, false, cfg, o)
}

// newStore opens the lease pool with leaseCfg and readies the lease table.
func newStore(ctx context.Context, pool *pgxpool.Pool, owns bool, leaseCfg *pgxpool.Config, o options) (*Store, error) {
	cc := leaseCfg.ConnConfig
	s := &Store{
		pool:         pool,
		ownsPool:     owns,
		opts:         o,
		schema:       o.schema,
		table:        pgx.Identifier{o.schema, o.table}.Sanitize(),
		versionTable: pgx.Identifier{o.schema, o.table + versionSuffix}.Sanitize(),
		channel:      channelName(o.schema, o.table),
		target:       target(&cc.Config),
		secrets:      []string{cc.Password},

		listenKeepAlive: listenKeepAlive,
	}
	s.changes = fanout.New(nil) // WithoutListener: only this Store's releases
	if o.listen {
		s.changes = fanout.New(s.listen)
	}
	s.stmts = pgsql.For(s.table)
	beforeConnect := leaseCfg.BeforeConnect
	leaseCfg.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
		if s.pooled.Load() && cc.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement {
			cc.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
		}
		if beforeConnect != nil {
			return beforeConnect(ctx, cc)
		}
		return nil
	}
	leases, err := pgxpool.NewWithConfig(ctx, leaseCfg)
	if err != nil {
		return nil, fmt.Errorf("pglease: open %s: %w", s.target, withoutSecrets(err, s.secrets...))
	}
	s.leases = leases
	err = s.ready(ctx)
	if s.usePoolerMode(err) {
		err = s.ready(ctx)
	}
	if err != nil {
		leases.Close()
		return nil, fmt.Errorf("pglease: open %s: %w", s.target, withoutSecrets(err, s.secrets...))
	}
	return s, nil
}

// ready checks that the session can write and readies the lease table.
func (s *Store) ready(ctx context.Context) error {
	if err := s.checkWritable(ctx); err != nil {
		return err
	}
	return s.ensureSchema(ctx)
}

// checkWritable refuses a session on which every lease write would fail.
func (s *Store) checkWritable(ctx context.Context) error {
	var standby, readOnly bool
	if err := s.leases.QueryRow(ctx, `SELECT pg_is_in_recovery(), current_setting('transaction_read_only')::boolean`).Scan(&standby, &readOnly); err != nil {
		return fmt.Errorf("read whether the session is read-only: %w", err)
	}
	const multiHost = "; with several hosts in the DSN, add target_session_attrs=read-write"
	switch {
	case standby:
		return errors.New("the server is a hot standby (in recovery), so every lease write would fail: connect to the primary" + multiHost)
	case readOnly:
		return errors.New("the session is read-only (default_transaction_read_only is on, for the role, the database or in the DSN), " +
			"so every lease write would fail: turn it off for the lease connections or connect to a writable server" + multiHost)
	}
	return nil
}

// channelName is the NOTIFY channel of a lease table:
// "leaderaware:schema.table", hashed when longer than an identifier.
func channelName(schema, table string) string {
	name := "leaderaware:" + schema + "." + table
	if len(name) <= maxIdentLen {
		return name
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	return "leaderaware:" + strconv.FormatUint(h.Sum64(), 16)
}

// Close stops the listener, closes the Store's pools (not one given to
// [New]) and returns nil. Operations after Close return [ErrClosed]; no
// Notify callback runs after it returns.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.changes.Close()
		s.leases.Close()
		if s.ownsPool {
			s.pool.Close()
		}
	})
	return nil
}
