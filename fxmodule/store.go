package fxmodule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/pglease"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// DefaultSQLitePath is the lease file [Module] opens when Config.Store is
// unset, relative to the working directory; outside Kubernetes only.
const DefaultSQLitePath = "leaderaware.db"

// StoreConfig selects the store of [Module]'s leases, for Config.Store:
// [SQLite] or [Postgres]. The zero value selects the default,
// [DefaultSQLitePath].
type StoreConfig struct {
	kind   storeKind
	path   string // SQLite
	dsn    string // PostgreSQL
	pgOpts []pglease.Option
}

type storeKind uint8

const (
	defaultStore storeKind = iota
	sqliteStore
	postgresStore
)

// SQLite keeps the leases in the SQLite file at path: every replica must
// open the same file, so all must run on one host, and its directory must
// exist. [NewSQLiteStore] says what it refuses.
func SQLite(path string) StoreConfig { return StoreConfig{kind: sqliteStore, path: path} }

// Postgres keeps the leases in PostgreSQL (replicas on many hosts), opened
// with [pglease.Open] on dsn, such as "postgres://app@db:5432/app", and
// opts.
func Postgres(dsn string, opts ...pglease.Option) StoreConfig {
	return StoreConfig{kind: postgresStore, dsn: dsn, pgOpts: opts}
}

// validate refuses a store chosen with an empty path or DSN: an unset
// environment variable must not move the leases to another store, where
// this replica would lead beside the others.
func (s StoreConfig) validate() error {
	empty := func(call, what, example string) error {
		return fmt.Errorf("%s: the %s is empty (an unset environment variable?); give it, such as %s", call, what, example)
	}
	switch {
	case s.kind == sqliteStore && strings.TrimSpace(s.path) == "":
		return empty(fmt.Sprintf("fxmodule.SQLite(%q)", s.path), "path of the lease file", `"/var/lib/app/leases.db"`)
	case s.kind == postgresStore && strings.TrimSpace(s.dsn) == "":
		return empty(fmt.Sprintf("fxmodule.Postgres(%q)", s.dsn), "DSN", `"postgres://app@db:5432/app"`)
	}
	return nil
}

// provide provides the store s selects, as its own type and as the
// elector.Store.
func (s StoreConfig) provide() fx.Option {
	if s.kind == postgresStore {
		return fx.Provide(openPostgres, postgresAsElectorStore)
	}
	return fx.Provide(openSQLite, sqliteAsElectorStore)
}

// openSQLite opens the SQLite store that s selects, for Module.
func openSQLite(lc fx.Lifecycle, s StoreConfig) (*sqlitelease.Store, error) {
	path := s.path
	if s.kind == defaultStore {
		path = DefaultSQLitePath
	}
	st, err := NewSQLiteStore(lc, path)
	if err != nil {
		return nil, err
	}
	attrs := []any{"store", "sqlite", "path", resolve(path)}
	if s.kind == defaultStore {
		attrs = append(attrs, "default", "Config.Store is unset")
	}
	logOpened(attrs...)
	return st, nil
}

// openPostgres opens the PostgreSQL store that s selects, for Module.
func openPostgres(lc fx.Lifecycle, s StoreConfig) (*pglease.Store, error) {
	st, err := NewPostgresStore(lc, s.dsn, s.pgOpts...)
	if err != nil {
		return nil, err
	}
	c := st.Pool().Config().ConnConfig
	logOpened("store", "postgres", "host", c.Host, "port", c.Port, "database", c.Database, "user", c.User, "table", st.Table())
	return st, nil
}

// logOpened logs the store that Module opened: the one place where Module
// logs.
func logOpened(attrs ...any) { slog.Info("fxmodule: opened the lease store", attrs...) }

// sqliteAsElectorStore and postgresAsElectorStore provide the store as the
// elector.Store. They are named functions rather than fx.As so that
// [WithStore] can replace elector.Store without the store being opened.
func sqliteAsElectorStore(s *sqlitelease.Store) elector.Store { return s }

func postgresAsElectorStore(s *pglease.Store) elector.Store { return s }

// NewSQLiteStore opens the SQLite lease file at path and, if lc is not nil,
// appends an OnStop hook that closes it. Errors name the path. In
// Kubernetes (the environment variable KUBERNETES_SERVICE_HOST is set) it
// refuses [DefaultSQLitePath], however the path spells it: each pod would
// have a file of its own, and every pod would lead. It is the constructor
// behind [SQLite] and the default; without fx, pass a nil lc and Close the
// store yourself.
func NewSQLiteStore(lc fx.Lifecycle, path string) (*sqlitelease.Store, error) {
	if os.Getenv("KUBERNETES_SERVICE_HOST") != "" && resolve(path) == resolve(DefaultSQLitePath) {
		return nil, fmt.Errorf("fxmodule: running in Kubernetes (KUBERNETES_SERVICE_HOST is set) with the default SQLite lease file %q (%s): "+
			"each pod gets its own file, so every pod would lead every job. "+
			"Keep the leases in Kubernetes Lease objects (fxmodule.WithStore(k8slease.New(client, namespace)), module github.com/leaderaware/leaderaware/k8slease), "+
			"in PostgreSQL (Config.Store: fxmodule.Postgres(dsn)), or in another store with fxmodule.WithStore, "+
			"or, if every replica runs on one node, use fxmodule.SQLite with a file on a volume they all share", path, resolve(path))
	}
	s, err := sqlitelease.Open(path)
	if err != nil {
		return nil, fmt.Errorf("fxmodule: lease store: %w", err)
	}
	appendClose(lc, s.Close)
	return s, nil
}

// resolve returns path absolute, with symlinks resolved as far as they
// exist, so that two spellings of one file compare equal.
func resolve(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(dir, filepath.Base(abs))
	}
	return abs
}

// postgresOpenTimeout bounds [NewPostgresStore]'s connection and schema
// setup: fx constructors get no context.
const postgresOpenTimeout = 30 * time.Second

// NewPostgresStore opens the PostgreSQL lease store on dsn with opts
// ([pglease.Open], bounded by 30 seconds) and, if lc is not nil, appends an
// OnStop hook that closes it. Errors name the server and database, never
// the password. It is the constructor behind [Postgres]; without fx, pass
// a nil lc and Close the store yourself.
func NewPostgresStore(lc fx.Lifecycle, dsn string, opts ...pglease.Option) (*pglease.Store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), postgresOpenTimeout)
	defer cancel()
	s, err := pglease.Open(ctx, dsn, opts...)
	if err != nil {
		return nil, fmt.Errorf("fxmodule: lease store: %w", err)
	}
	appendClose(lc, s.Close)
	return s, nil
}

// appendClose appends an OnStop hook that calls closeStore, if lc is not
// nil.
func appendClose(lc fx.Lifecycle, closeStore func() error) {
	if lc != nil {
		lc.Append(fx.StopHook(closeStore))
	}
}

// WithStore replaces the elector.Store that [Module] provides with s, such
// as an *elector.MemoryStore (tests) or a store of another package:
//
//	fx.New(
//		fxmodule.Module(fxmodule.Config{}),
//		fxmodule.WithStore(store),
//		...
//	)
//
// Every [LeaderJob] then campaigns in s, and Module's store is not opened
// (unless something in the graph asks for *sqlitelease.Store or
// *pglease.Store itself). The caller owns s and closes it. Put WithStore at
// the top level of the app, or in a module that contains the LeaderJob
// options: an fx replacement applies to the module it is in and the
// modules inside it. A nil s is an error from fx.New.
func WithStore(s elector.Store) fx.Option {
	if s == nil || (reflect.ValueOf(s).Kind() == reflect.Pointer && reflect.ValueOf(s).IsNil()) {
		return fx.Error(errors.New("fxmodule.WithStore: the store is nil"))
	}
	return fx.Replace(fx.Annotate(s, fx.As(new(elector.Store))))
}
