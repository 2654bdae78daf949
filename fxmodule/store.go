package fxmodule

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
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

// provide provides the store s selects: once, when something first asks
// for it, as an *opened, and from that as its own type and as the
// elector.Store.
func (s StoreConfig) provide() fx.Option {
	if s.kind == postgresStore {
		return fx.Provide(openPostgres, concrete[*pglease.Store], electorStore)
	}
	return fx.Provide(openSQLite, concrete[*sqlitelease.Store], electorStore)
}

// opened is the store Module opened, or why it could not. Its constructors
// never fail, so that each LeaderJob returns the error from an fx.Invoke of
// its own (see [storeOpened]), which fx reports as it is, rather than at the
// end of the chain of constructors that asked for the store.
type opened struct {
	store elector.Store
	err   error
}

// storeOpened returns why Module's store could not be opened, if it could
// not, or nil: with [WithStore], Module's store is not opened.
func storeOpened(p struct {
	fx.In
	Opened *opened `optional:"true"`
}) error {
	if p.Opened == nil {
		return nil
	}
	return p.Opened.err
}

// concrete provides the store Module opened as its own type S.
func concrete[S elector.Store](o *opened) (S, error) {
	if o.err != nil {
		var zero S
		return zero, o.err
	}
	return o.store.(S), nil
}

// electorStore provides the store Module opened as the elector.Store. It is
// a named function rather than fx.As so that [WithStore] can replace
// elector.Store without the store being opened.
func electorStore(o *opened) (elector.Store, error) { return o.store, o.err }

// openSQLite opens the SQLite store that s selects, for Module, with
// Module's logger.
func openSQLite(lc fx.Lifecycle, s StoreConfig, log *moduleLogger) *opened {
	path := s.path
	if s.kind == defaultStore {
		path = DefaultSQLitePath
	}
	st, err := NewSQLiteStore(lc, path, sqlitelease.WithLogger(log.l))
	if err != nil {
		return &opened{err: err}
	}
	attrs := []any{"store", "sqlite", "path", resolve(path)}
	if s.kind == defaultStore {
		attrs = append(attrs, "default", "Config.Store is unset")
	}
	log.opened(attrs...)
	return &opened{store: st}
}

// openPostgres opens the PostgreSQL store that s selects, for Module, with
// Module's logger unless s's options set one.
func openPostgres(lc fx.Lifecycle, s StoreConfig, log *moduleLogger) *opened {
	st, err := NewPostgresStore(lc, s.dsn, append([]pglease.Option{pglease.WithLogger(log.l)}, s.pgOpts...)...)
	if err != nil {
		return &opened{err: err}
	}
	c := st.Pool().Config().ConnConfig
	log.opened("store", "postgres", "host", c.Host, "port", c.Port, "database", c.Database, "user", c.User, "table", st.Table())
	return &opened{store: st}
}

// NewSQLiteStore opens the SQLite lease file at path with opts
// ([sqlitelease.Open]) and, if lc is not nil, appends an OnStop hook that
// closes it. Errors name the path. In
// Kubernetes (the environment variable KUBERNETES_SERVICE_HOST is set) it
// refuses [DefaultSQLitePath], however the path spells it: each pod would
// have a file of its own, and every pod would lead. It is the constructor
// behind [SQLite] and the default; without fx, pass a nil lc and Close the
// store yourself.
func NewSQLiteStore(lc fx.Lifecycle, path string, opts ...sqlitelease.Option) (*sqlitelease.Store, error) {
	if os.Getenv("KUBERNETES_SERVICE_HOST") != "" && resolve(path) == resolve(DefaultSQLitePath) {
		return nil, fmt.Errorf("fxmodule: running in Kubernetes (KUBERNETES_SERVICE_HOST is set) with the default SQLite lease file %q (%s): "+
			"each pod gets its own file, so every pod would lead every job. "+
			"Keep the leases in Kubernetes Lease objects (fxmodule.WithStore(k8slease.New(client, namespace)), module github.com/leaderaware/leaderaware/k8slease), "+
			"in PostgreSQL (Config.Store: fxmodule.Postgres(dsn)), or in another store with fxmodule.WithStore, "+
			"or, if every replica runs on one node, use fxmodule.SQLite with a file on a volume they all share", path, resolve(path))
	}
	s, err := sqlitelease.Open(path, opts...)
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
		return nil, postgresError(dsn, err)
	}
	appendClose(lc, s.Close)
	return s, nil
}

// postgresError returns err, from opening the store on dsn, as an error
// that starts with what is wrong and the fix, in a few words, where it can
// tell them: a DSN that cannot be parsed, a database that does not exist.
// It unwraps to err, and never shows the password.
func postgresError(dsn string, err error) error {
	cfg, perr := pgconn.ParseConfig(dsn)
	if perr != nil {
		return &openError{fmt.Sprintf("fxmodule.Postgres: the DSN cannot be parsed; give it as postgres://user@host:5432/db (%v)", err), err}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "3D000" { // invalid_catalog_name
		return &openError{fmt.Sprintf("fxmodule.Postgres: database %q does not exist on %s:%d; create it, or name an existing one in the DSN (postgres://user@host:5432/db)",
			cfg.Database, cfg.Host, cfg.Port), err}
	}
	return fmt.Errorf("fxmodule: lease store: %w", err)
}

// openError is an error whose text says what is wrong and what to do, and
// that unwraps to the store's own error.
type openError struct {
	msg string
	err error
}

func (e *openError) Error() string { return e.msg }
func (e *openError) Unwrap() error { return e.err }

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
	return fx.Replace(fx.Annotate(s, fx.As(new(elector.Store))), &opened{store: s})
}
