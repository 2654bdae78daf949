package fxmodule

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"

	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// NewSQLiteStore opens the SQLite lease file of cfg (Config.SQLitePath, or
// [DefaultSQLitePath] if it is empty) and, if lc is not nil, appends an
// OnStop hook that closes it. Errors name the path. In Kubernetes (the
// environment variable KUBERNETES_SERVICE_HOST is set) it refuses the
// default path: each pod would have a file of its own, and every pod would
// lead. It is the constructor [Module] provides; without fx, pass a nil lc
// and Close the store yourself.
func NewSQLiteStore(lc fx.Lifecycle, cfg Config) (*sqlitelease.Store, error) {
	path := cfg.SQLitePath
	if path == "" {
		if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
			return nil, fmt.Errorf("fxmodule: running in Kubernetes (KUBERNETES_SERVICE_HOST is set) with the default SQLite lease file %q: "+
				"each pod gets its own file, so every pod would lead every job. "+
				"Keep the leases in PostgreSQL (fxmodule.WithStore with a *pglease.Store), "+
				"or, if every replica runs on one node, set Config.SQLitePath to a file on a volume they all share", DefaultSQLitePath)
		}
		path = DefaultSQLitePath
	}
	s, err := sqlitelease.Open(path)
	if err != nil {
		return nil, fmt.Errorf("fxmodule: lease store: %w", err)
	}
	if lc != nil {
		lc.Append(fx.StopHook(func(context.Context) error { return s.Close() }))
	}
	return s, nil
}

// sqliteAsElectorStore provides the SQLite store as the elector.Store. It
// is a named function rather than fx.As so that [WithStore] can replace
// elector.Store without the file being opened.
func sqliteAsElectorStore(s *sqlitelease.Store) elector.Store { return s }

// WithStore replaces the elector.Store that [Module] provides with s, such
// as a *pglease.Store (many hosts) or an *elector.MemoryStore (tests):
//
//	fx.New(
//		fxmodule.Module(fxmodule.Config{}),
//		fxmodule.WithStore(pgStore),
//		...
//	)
//
// Every [LeaderJob] then campaigns in s, and the SQLite file is not opened
// (unless something in the graph asks for *sqlitelease.Store itself). The
// caller owns s and closes it. Put WithStore at the top level of the app, or
// in a module that contains the LeaderJob options: an fx replacement
// applies to the module it is in and the modules inside it. A nil s is an
// error from fx.New.
func WithStore(s elector.Store) fx.Option {
	if s == nil || (reflect.ValueOf(s).Kind() == reflect.Pointer && reflect.ValueOf(s).IsNil()) {
		return fx.Error(errors.New("fxmodule.WithStore: the store is nil"))
	}
	return fx.Replace(fx.Annotate(s, fx.As(new(elector.Store))))
}
