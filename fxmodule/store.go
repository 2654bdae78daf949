package fxmodule

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"time"

	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/pglease"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// NewSQLiteStore opens the SQLite lease file of cfg (Config.SQLitePath, or
// [DefaultSQLitePath] if it is empty) and, if lc is not nil, appends an
// OnStop hook that closes it. Errors name the path. In Kubernetes (the
// environment variable KUBERNETES_SERVICE_HOST is set) it refuses the
// default path: each pod would have a file of its own, and every pod would
// lead. It is the constructor [Module] provides without
// Config.PostgresDSN; without fx, pass a nil lc and Close the store
// yourself.
func NewSQLiteStore(lc fx.Lifecycle, cfg Config) (*sqlitelease.Store, error) {
	path := cfg.SQLitePath
	if path == "" {
		if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
			return nil, fmt.Errorf("fxmodule: running in Kubernetes (KUBERNETES_SERVICE_HOST is set) with the default SQLite lease file %q: "+
				"each pod gets its own file, so every pod would lead every job. "+
				"Keep the leases in PostgreSQL (set Config.PostgresDSN, or fxmodule.WithStore with a store of your own), "+
				"or, if every replica runs on one node, set Config.SQLitePath to a file on a volume they all share", DefaultSQLitePath)
		}
		path = DefaultSQLitePath
	}
	s, err := sqlitelease.Open(path)
	if err != nil {
		return nil, fmt.Errorf("fxmodule: lease store: %w", err)
	}
	appendClose(lc, s.Close)
	return s, nil
}

// postgresOpenTimeout bounds [NewPostgresStore]'s connection and schema
// setup: fx constructors get no context.
const postgresOpenTimeout = 30 * time.Second

// NewPostgresStore opens the PostgreSQL lease store on Config.PostgresDSN
// with Config.PostgresOptions ([pglease.Open], bounded by 30 seconds) and,
// if lc is not nil, appends an OnStop hook that closes it. Errors name the
// server and database, never the password. It is the constructor [Module]
// provides with Config.PostgresDSN; without fx, pass a nil lc and Close the
// store yourself.
func NewPostgresStore(lc fx.Lifecycle, cfg Config) (*pglease.Store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), postgresOpenTimeout)
	defer cancel()
	s, err := pglease.Open(ctx, cfg.PostgresDSN, cfg.PostgresOptions...)
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

// sqliteAsElectorStore and postgresAsElectorStore provide the store as the
// elector.Store. They are named functions rather than fx.As so that
// [WithStore] can replace elector.Store without the store being opened.
func sqliteAsElectorStore(s *sqlitelease.Store) elector.Store { return s }

func postgresAsElectorStore(s *pglease.Store) elector.Store { return s }

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
