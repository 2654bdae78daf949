// Package fxmodule wires leaderaware into a go.uber.org/fx application in
// one line per job:
//
//	fx.New(
//		fxmodule.Module(fxmodule.Config{}), // leases in ./leaderaware.db
//		fx.Provide(NewCacheWarmer), // returns *CacheWarmer, which has Start and Stop
//		fxmodule.LeaderJob[*CacheWarmer]("cache-warmer"),
//	)
//
// [Module] (the fx module "leaderaware") provides the lease store
// ([elector.Store]: a *sqlitelease.Store on one SQLite file by default, or
// the store that Config.Store selects; closed when the app stops) and
// the [elector.Config]. [LeaderJob] decorates the job of type J in the
// graph with [decorator.Decorate] and appends OnStart/OnStop hooks that
// start and stop the decorated job: on every replica the job's constructor
// runs, but the job itself runs on the one replica that holds its lease. J
// is the concrete type the constructor returns (the graph keeps the plain
// job), or an interface type of the job's own, such as
// `type PriceRefresher decorator.Job`, which LeaderJob replaces in the graph
// with the decorated job. Give each job a lease name of its own, and
// [WithElector] to a job whose pace differs from the others'.
//
// The leases live in one SQLite file (replicas on one host), in PostgreSQL
// (replicas on many hosts), or in any store given with [WithStore]:
//
//	fxmodule.Module(fxmodule.Config{Store: fxmodule.SQLite("/var/lib/app/leases.db")})
//	fxmodule.Module(fxmodule.Config{Store: fxmodule.Postgres(os.Getenv("DATABASE_URL"))})
//	fxmodule.WithStore(elector.NewMemoryStore()) // next to Module; tests
//
// Module logs which store it opened. A store chosen in Config.Store with an
// empty path or DSN (an unset environment variable) is an error, never the
// default file: replicas on two stores would each lead.
//
// # Logging
//
// Every line the library writes in the app goes to one logger, the app's
// (see Config.Logger). Messages carry no time of their own: a record's time
// is the handler's, so a JSON handler shows each handoff to the nanosecond.
// fx's own lines go where fx.WithLogger sends them.
//
// # Status, health and metrics
//
// Module provides a *[Registry] of the app's LeaderJobs: which jobs this
// replica leads ([Registry.Jobs]), who leads a lease ([Registry.Leader]),
// the liveness check of the app ([Registry.Healthy]; followers are
// healthy) and a readiness check that never depends on leadership
// ([Registry.Ready]). An elector.Observer in the graph, such as a metrics
// collector, observes every LeaderJob's elector and decorated job:
//
//	fx.Provide(func() elector.Observer { return metrics })
//
// # Balancing
//
// The LeaderJobs of the app in its store are one [placement.Group] with
// those of the other replicas that run the same jobs (Config.Group): the
// leases spread over the replicas, a replica that joins takes its share,
// and stopping the app first drains it, handing its leases to the others
// before its jobs stop. Config.NoBalance turns the spreading off.
// [Registry.Members], [Registry.Waiting] and [Registry.Drain] show and
// move it; Drain moves leadership, so never serve it on an
// unauthenticated port.
//
// # Errors
//
// Mistakes that can be seen before the app is built (an interface J that
// cannot be replaced, a bad lease name, bad elector timings, a store
// given an empty path or DSN, a nil store) are errors from fx.New (app.Err) that name
// the bad value: nothing is constructed, opened or started, and nothing
// panics. So are mistakes that would otherwise go unnoticed, and the store
// is then not opened: two jobs under one lease name (only one of them
// would ever run), and the default SQLite file in Kubernetes, however its
// path is spelled (each pod would have a file of its own, so every pod
// would lead). A LeaderJob
// without Module is an error that starts with the fix ("add
// fxmodule.Module(...) to the app"), and one whose J nothing provides says
// "provide the job" and names J. A store that cannot be opened is an error
// from fx.New that is the store's alone, not fx's chain of constructors, and
// starts with the fix where it is known: `fxmodule.Postgres: database "app"
// does not exist on db:5432; create it, ...`, or the form a malformed DSN
// should take.
//
// # Starting with the store down
//
// Module opens the store while fx.New builds the graph and does not retry:
// a store that cannot be reached (a database that is down, at most 30
// seconds for PostgreSQL to answer) is an error from fx.New, and the
// process should exit. Under a supervisor that restarts it with backoff, as
// Kubernetes does (CrashLoopBackOff, 10s doubling to 5 minutes), the app
// comes up once the store does; retrying inside the process instead would
// hide the outage from the supervisor and hold fx's start deadline.
//
// # Without fx
//
// The constructors behind the module, [NewSQLiteStore], [NewPostgresStore]
// and [NewLeaderJob], work without fx.
package fxmodule
