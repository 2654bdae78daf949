package fxmodule

import (
	"fmt"
	"log/slog"

	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/placement"
)

// Config configures [Module].
type Config struct {
	// Store is where the leases live: [SQLite] (replicas on one host) or
	// [Postgres] (replicas on many hosts). Unset, they live in the SQLite
	// file [DefaultSQLitePath], and Module says so in its log; a store
	// chosen here and given an empty path or DSN is an error, never the
	// default.
	Store StoreConfig
	// Elector sets the timings, holder name and observer of every job's
	// elector; the zero value takes the defaults of [elector.Config], and
	// [WithElector] changes the timings of one job. A nil Observer takes
	// the graph's elector.Observer, if one is provided (see [LeaderJob]).
	// A Holder set here names this replica in every job's lease: it must
	// differ between replicas (jobs of one app may share it, as their
	// leases differ), and a restarted replica that keeps it waits for its
	// old leases to expire. Empty, each elector gets a unique default.
	Elector elector.Config
	// Logger receives every line the library writes in the app: the store
	// Module opened, each LeaderJob's elections, demotions and errors
	// ([decorator.WithLogger], unless a LeaderJob's options set another),
	// and the lines of the store itself ([sqlitelease.WithLogger],
	// [pglease.WithLogger]). Nil takes the graph's
	// *slog.Logger if one is provided, else [slog.Default].
	Logger *slog.Logger
	// Group names the placement group of the app's LeaderJobs: the
	// replicas that run the same jobs in one store, which spread the
	// leases among them, see each other ([Registry.Members]) and take
	// over the leases of one that drains ([Registry.Drain]). Each
	// replica keeps a membership seat, a lease of its own, in the store.
	// Empty, it is derived from the app's lease names ("fx-" and a short
	// hash of them sorted), so replicas of one app are one group; give
	// one to keep the group across a deploy that adds or removes a job.
	// Every member of a group must run the same jobs: a member counts
	// toward the target of every lease, so apps with different jobs in
	// one group give leases up to members that never take them (and take
	// them back after a delay, again and again). The LeaderJobs that [WithStore] puts in another
	// store are a group of their own there, under the same name.
	Group string
	// NoBalance turns balancing off: each lease goes to the first
	// replica that asks, as without placement, and none is given up to
	// balance the group. The members are still kept and listed, and
	// Drain still works.
	NoBalance bool
}

// moduleMark is in the graph when [Module] is: LeaderJob asks for it to
// tell a missing Module from other missing types.
type moduleMark struct{}

// Module is the fx module "leaderaware". It provides:
//
//   - elector.Config: cfg.Elector, as given (zero fields take their
//     defaults in each elector);
//   - the lease store that cfg.Store selects, opened when something first
//     asks for it, logged at Info (see Config.Logger) with where it is and
//     whether it is the default, and closed by an OnStop hook, after the
//     OnStop hooks of everything constructed later (such as the jobs): a
//     *sqlitelease.Store (see [NewSQLiteStore]; in Kubernetes, the
//     default file is an error from fx.New instead) or a *pglease.Store
//     (see [NewPostgresStore]);
//   - elector.Store: that store, unless [WithStore] replaces it (and then
//     the store is not opened unless something asks for its own type);
//   - *[Registry]: the LeaderJobs of the app, for status pages, and the
//     app's liveness and readiness checks.
//
// A bad cfg (bad cfg.Elector timings, a cfg.Store given an empty path or
// DSN) becomes an error from fx.New (app.Err), naming the bad value,
// before anything is constructed or opened.
//
// If fx.New fails after the store was opened (a later constructor returned
// an error), fx runs no OnStop hook, so the store stays open until the
// process exits, as fx apps do when fx.New fails. Bad input that this
// package can see (a J that cannot be decorated, a bad lease name or
// elector config, two jobs under one lease name, the default file in
// Kubernetes) fails before the store is opened.
func Module(cfg Config) fx.Option {
	if err := cfg.validate(); err != nil {
		return fx.Error(fmt.Errorf("fxmodule.Module: %w", err))
	}
	return fx.Module("leaderaware",
		fx.Supply(cfg.Elector, &moduleMark{}, &placeConfig{cfg}),
		fx.Supply(fx.Private, cfg.Store),
		fx.Provide(newRegistry),
		provideLogger(cfg.Logger),
		cfg.Store.provide(),
	)
}

// validate returns an error naming the first bad value of c.
func (c Config) validate() error {
	if err := c.Store.validate(); err != nil {
		return fmt.Errorf("Config.Store: %w", err)
	}
	if err := c.Elector.Validate(); err != nil {
		return err
	}
	if c.Group == "" {
		return nil
	}
	if err := c.placement(c.Group).Validate(); err != nil {
		return fmt.Errorf("Config.Group: %w", err)
	}
	return nil
}

// placement returns the placement.Config of the group name of c's
// LeaderJobs.
func (c Config) placement(name string) placement.Config {
	return placement.Config{
		Name:          name,
		Holder:        c.Elector.Holder,
		TTL:           c.Elector.TTL,
		RetryInterval: c.Elector.RetryInterval,
		NoBalance:     c.NoBalance,
		Logger:        c.Logger,
	}
}
