package fxmodule_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/fxmodule"
)

// Reporter is the job's type in the graph: an interface of its own, so
// that LeaderJob can decorate it and nothing else.
type Reporter decorator.Job

// reporter is a job that says when it starts and stops.
type reporter struct{ started chan<- struct{} }

func (r *reporter) Start(context.Context) error {
	fmt.Println("started")
	close(r.started)
	return nil
}

func (r *reporter) Stop(context.Context) error {
	fmt.Println("stopped")
	return nil
}

// Example runs one job leader-aware in an fx app. The leases live in
// memory here (WithStore); drop that line to keep them in the SQLite file
// leaderaware.db, shared by every replica on the host.
func Example() {
	started := make(chan struct{})
	app := fx.New(
		fx.NopLogger,
		fxmodule.Module(fxmodule.Config{}),
		fxmodule.WithStore(elector.NewMemoryStore()),
		fx.Provide(func() Reporter { return &reporter{started: started} }),
		fxmodule.LeaderJob[Reporter]("reporter"),
	)
	ctx := context.Background()
	if err := app.Start(ctx); err != nil {
		log.Fatal(err)
	}
	<-started // the job starts once this replica leads
	if err := app.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// started
	// stopped
}

// CacheWarmer is a job the way most apps have one: a concrete type that its
// constructor returns.
type CacheWarmer struct{ warmed chan<- struct{} }

func NewCacheWarmer(warmed chan<- struct{}) *CacheWarmer { return &CacheWarmer{warmed: warmed} }

func (w *CacheWarmer) Start(context.Context) error {
	fmt.Println("warming")
	close(w.warmed)
	return nil
}

func (w *CacheWarmer) Stop(context.Context) error {
	fmt.Println("stopped")
	return nil
}

// ExampleLeaderJob_concrete runs a job of a concrete type leader-aware, as
// its constructor returns it. LeaderJob leaves the graph's *CacheWarmer as
// it is (whatever else asks for it gets the plain job) and runs a decorated
// copy of its own.
func ExampleLeaderJob_concrete() {
	warmed := make(chan struct{})
	app := fx.New(
		fx.NopLogger,
		fxmodule.Module(fxmodule.Config{}),
		fxmodule.WithStore(elector.NewMemoryStore()),
		fx.Provide(func() *CacheWarmer { return NewCacheWarmer(warmed) }),
		fxmodule.LeaderJob[*CacheWarmer]("cache-warmer"),
	)
	ctx := context.Background()
	if err := app.Start(ctx); err != nil {
		log.Fatal(err)
	}
	<-warmed // the job starts once this replica leads
	if err := app.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// warming
	// stopped
}

// ExamplePostgres keeps the leases in PostgreSQL, for replicas on many
// hosts. With DATABASE_URL unset, fx.New fails with an error naming
// Config.Store: the leases never fall back to the SQLite file.
func ExamplePostgres() {
	app := fx.New(
		fxmodule.Module(fxmodule.Config{Store: fxmodule.Postgres(os.Getenv("DATABASE_URL"))}),
		fx.Provide(func() *CacheWarmer { return NewCacheWarmer(make(chan struct{})) }),
		fxmodule.LeaderJob[*CacheWarmer]("cache-warmer"),
	)
	app.Run()
}

// ExampleSQLite keeps the leases in a SQLite file that every replica on
// the host opens.
func ExampleSQLite() {
	app := fx.New(
		fxmodule.Module(fxmodule.Config{Store: fxmodule.SQLite("/var/lib/app/leases.db")}),
		fx.Provide(func() *CacheWarmer { return NewCacheWarmer(make(chan struct{})) }),
		fxmodule.LeaderJob[*CacheWarmer]("cache-warmer"),
	)
	app.Run()
}
