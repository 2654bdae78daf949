package fxmodule

import (
	"errors"
	"fmt"

	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/pglease"
)

// DefaultSQLitePath is the lease file [Module] opens when neither
// Config.SQLitePath nor Config.PostgresDSN is set, relative to the working
// directory; outside Kubernetes only.
const DefaultSQLitePath = "leaderaware.db"

// Config configures [Module]. Set at most one of SQLitePath and
// PostgresDSN; with neither, the leases live in [DefaultSQLitePath].
type Config struct {
	// SQLitePath is the SQLite file that holds the leases. Every replica
	// must use the same file, so all must run on one host; its directory
	// must exist. Default [DefaultSQLitePath], which [NewSQLiteStore]
	// refuses in Kubernetes, where each pod would have its own.
	SQLitePath string
	// PostgresDSN, if set, keeps the leases in PostgreSQL instead (replicas
	// on many hosts): the DSN of the database, as [pglease.Open] takes it,
	// such as "postgres://app@db:5432/app". The SQLite file is then never
	// opened.
	PostgresDSN string
	// PostgresOptions are passed to [pglease.Open], for example
	// pglease.WithSchema. Only with PostgresDSN.
	PostgresOptions []pglease.Option
	// Elector sets the timings, holder name and observer of every job's
	// elector; the zero value takes the defaults of [elector.Config], and
	// [WithElector] changes the timings of one job. A nil Observer takes
	// the graph's elector.Observer, if one is provided (see [LeaderJob]).
	// A Holder set here names this replica in every job's lease: it must
	// differ between replicas (jobs of one app may share it, as their
	// leases differ), and a restarted replica that keeps it waits for its
	// old leases to expire. Empty, each elector gets a unique default.
	Elector elector.Config
}

// moduleMark is in the graph when [Module] is: LeaderJob asks for it to
// tell a missing Module from other missing types.
type moduleMark struct{}

// Module is the fx module "leaderaware". It provides:
//
//   - elector.Config: cfg.Elector, as given (zero fields take their
//     defaults in each elector);
//   - the lease store, opened when something first asks for it and closed
//     by an OnStop hook, after the OnStop hooks of everything constructed
//     later (such as the jobs): a *pglease.Store on cfg.PostgresDSN if it
//     is set (see [NewPostgresStore]), and otherwise a *sqlitelease.Store
//     on the SQLite file at cfg.SQLitePath (see [NewSQLiteStore]; in
//     Kubernetes, the default path is an error from fx.New instead);
//   - elector.Store: that store, unless [WithStore] replaces it (and then
//     the store is not opened unless something asks for its own type);
//   - *[Registry]: the LeaderJobs of the app, for status pages, and the
//     app's liveness and readiness checks.
//
// A bad cfg (bad cfg.Elector timings, both SQLitePath and PostgresDSN, or
// PostgresOptions without PostgresDSN) becomes an error from fx.New
// (app.Err), naming the bad value, before anything is constructed or
// opened.
//
// If fx.New fails after the store was opened (a later constructor returned
// an error), fx runs no OnStop hook, so the store stays open until the
// process exits, as fx apps do when fx.New fails. Bad input that this
// package can see (a J that cannot be decorated, a bad lease name or
// elector config, two jobs under one lease name, the default path in
// Kubernetes) fails before the store is opened.
func Module(cfg Config) fx.Option {
	if err := cfg.validate(); err != nil {
		return fx.Error(fmt.Errorf("fxmodule.Module: %w", err))
	}
	store := fx.Provide(NewSQLiteStore, sqliteAsElectorStore)
	if cfg.PostgresDSN != "" {
		store = fx.Provide(NewPostgresStore, postgresAsElectorStore)
	}
	return fx.Module("leaderaware",
		fx.Supply(cfg.Elector, &moduleMark{}),
		fx.Supply(fx.Private, cfg),
		fx.Provide(newRegistry),
		store,
	)
}

// validate returns an error naming the first bad value of c.
func (c Config) validate() error {
	if c.SQLitePath != "" && c.PostgresDSN != "" {
		return fmt.Errorf("both Config.SQLitePath %q and Config.PostgresDSN are set; keep the leases in one store: set one of them", c.SQLitePath)
	}
	if len(c.PostgresOptions) > 0 && c.PostgresDSN == "" {
		return errors.New("Config.PostgresOptions is set without Config.PostgresDSN; set PostgresDSN to keep the leases in PostgreSQL")
	}
	return c.Elector.Validate()
}
