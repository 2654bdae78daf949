// Package fxmodule wires leaderaware into a go.uber.org/fx application in
// one line per job:
//
//	fx.New(
//		fxmodule.Module(fxmodule.Config{SQLitePath: "app.db"}),
//		fx.Provide(NewPriceRefresher), // returns PriceRefresher, an interface with Start and Stop
//		fxmodule.LeaderJob[PriceRefresher]("price-refresh"),
//	)
//
// [Module] (the fx module "leaderaware") provides the lease store
// ([elector.Store]: a *sqlitelease.Store on one SQLite file by default,
// closed when the app stops) and the [elector.Config]. [LeaderJob]
// decorates the job type in the graph with [decorator.Decorate] and appends
// OnStart/OnStop hooks that start and stop the decorated job: on every
// replica the job's constructor runs, but the job itself runs on the one
// replica that holds its lease. Give each job an interface type of its own
// (`type PriceRefresher decorator.Job`) and a lease name of its own.
//
// To keep leases in PostgreSQL (many hosts) or memory (tests) instead, add one
// line next to Module:
//
//	fxmodule.WithStore(pgStore) // any elector.Store; the SQLite file is then never opened
//
// # Errors
//
// Mistakes that can be seen before the app is built (a J that cannot be
// decorated, a bad lease name, bad elector timings, a nil store) are
// errors from fx.New (app.Err) that name the bad value: nothing is
// constructed, opened or started, and nothing panics. So are two
// mistakes that would otherwise go unnoticed, and the store is then not
// opened: two jobs under one lease name (only one of them would ever run),
// and the default SQLite path in Kubernetes (each pod would have a file of
// its own, so every pod would lead).
//
// # Without fx
//
// The constructors behind the module, [NewSQLiteStore] and [NewLeaderJob],
// work without fx.
package fxmodule
