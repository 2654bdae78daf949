package fxmodule

import (
	"fmt"

	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/elector"
)

// DefaultSQLitePath is the lease file [Module] opens when Config.SQLitePath
// is empty, relative to the working directory; outside Kubernetes only.
const DefaultSQLitePath = "leaderaware.db"

// Config configures [Module].
type Config struct {
	// SQLitePath is the SQLite file that holds the leases. Every replica
	// must use the same file, so all must run on one host; its directory
	// must exist. Default [DefaultSQLitePath], which [NewSQLiteStore]
	// refuses in Kubernetes, where each pod would have its own.
	SQLitePath string
	// Elector sets the timings and holder name of every job's elector; the
	// zero value takes the defaults of [elector.Config]. A Holder set here
	// names this replica in every job's lease: it must differ between
	// replicas (jobs of one app may share it, as their leases differ), and
	// a restarted replica that keeps it waits for its old leases to expire.
	// Empty, each elector gets a unique default.
	Elector elector.Config
}

// Module is the fx module "leaderaware". It provides:
//
//   - elector.Config: cfg.Elector, as given (zero fields take their
//     defaults in each elector);
//   - *sqlitelease.Store: the SQLite file at cfg.SQLitePath, opened when
//     something first asks for it and closed by an OnStop hook, after the
//     OnStop hooks of everything constructed later (such as the jobs). In
//     Kubernetes, the default path is an error from fx.New instead (see
//     [NewSQLiteStore]);
//   - elector.Store: that *sqlitelease.Store, unless [WithStore] replaces
//     it (and then the file is not opened unless something asks for
//     *sqlitelease.Store itself).
//
// A bad cfg.Elector becomes an error from fx.New (app.Err), naming the bad
// value, before anything is constructed or opened.
//
// If fx.New fails after the store was opened (a later constructor returned
// an error), fx runs no OnStop hook, so the file stays open until the
// process exits, as fx apps do when fx.New fails. Bad input that this
// package can see (a J that cannot be decorated, a bad lease name or
// elector config, two jobs under one lease name, the default path in
// Kubernetes) fails before the store is opened.
func Module(cfg Config) fx.Option {
	if err := cfg.Elector.Validate(); err != nil {
		return fx.Error(fmt.Errorf("fxmodule.Module: %w", err))
	}
	return fx.Module("leaderaware",
		fx.Supply(cfg.Elector),
		fx.Supply(fx.Private, cfg),
		fx.Provide(NewSQLiteStore, sqliteAsElectorStore),
	)
}
