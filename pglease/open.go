package pglease

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Open connects to the PostgreSQL server that dsn names, a URL
// ("postgres://user:pass@host:5432/db?sslmode=disable") or keyword/value
// ("host=... dbname=...") string as pgx parses it, creates or migrates the
// lease table (see [SchemaVersion]) and returns a Store on a pool of its
// own, which [Store.Close] closes.
//
// Connections get application_name [DefaultApplicationName] unless the DSN
// or [WithApplicationName] sets one. Errors name the host, port, database
// and user, and never contain the password.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	cfg, err := parseDSN(dsn, o)
	if err != nil {
		return nil, err
	}
	secrets := []string{cfg.ConnConfig.Password}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pglease: open %s: %w", target(&cfg.ConnConfig.Config), withoutSecrets(err, secrets...))
	}
	s, err := newStore(ctx, pool, true, o)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// parseDSN parses dsn into a pool configuration with the application name
// set. Its errors never contain the password. It does not connect.
func parseDSN(dsn string, o options) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, parseError(dsn, err)
	}
	params := cfg.ConnConfig.RuntimeParams
	if o.appName != "" {
		params["application_name"] = o.appName
	} else if params["application_name"] == "" {
		params["application_name"] = DefaultApplicationName
	}
	return cfg, nil
}

// New returns a Store on pool, which the caller keeps: [Store.Close] does
// not close it. It creates or migrates the lease table like [Open]. The
// listener opens its own connection with the pool's connection settings.
func New(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("pglease: New: nil pool")
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	return newStore(ctx, pool, false, o)
}

func newStore(ctx context.Context, pool *pgxpool.Pool, owns bool, o options) (*Store, error) {
	cc := pool.Config().ConnConfig
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
		watchers:     make(map[string]map[chan struct{}]struct{}),

		listenKeepAlive: listenKeepAlive,
	}
	s.prepareSQL()
	if err := pool.Ping(ctx); err != nil {
		return nil, fmt.Errorf("pglease: connect to %s: %w", s.target, withoutSecrets(err, s.secrets...))
	}
	if err := s.ensureSchema(ctx); err != nil {
		return nil, fmt.Errorf("pglease: open %s: %w", s.target, withoutSecrets(err, s.secrets...))
	}
	return s, nil
}

// channelName is the NOTIFY channel of a lease table:
// "leaderaware:schema.table", or a hash of it when that exceeds PostgreSQL's
// 63-byte limit.
func channelName(schema, table string) string {
	name := "leaderaware:" + schema + "." + table
	if len(name) <= maxIdentLen {
		return name
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	return "leaderaware:" + strconv.FormatUint(h.Sum64(), 16)
}

// Close stops the listener and waits for it, then closes the pool if [Open]
// made it. Operations after Close return [ErrClosed]. Close is idempotent
// and always returns nil; it is an error so that Store fits io.Closer.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed.Store(true)
		l := s.listener
		s.mu.Unlock()
		if l != nil {
			l.stop()
		}
		if s.ownsPool {
			s.pool.Close()
		}
	})
	return nil
}
