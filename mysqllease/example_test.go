package mysqllease_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/fxmodule"
	"github.com/leaderaware/leaderaware/mysqllease"
)

// Open a store, campaign for a lease and write under its fence. Every
// replica runs the same code; one at a time gets past Campaign.
func Example() {
	ctx := context.Background()
	store, err := mysqllease.Open(ctx, os.Getenv("MYSQL_DSN")) // e.g. app:secret@tcp(db:3306)/app
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	e, err := elector.New(store, "price-refresh", elector.Config{TTL: 15 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	term, err := e.Campaign(ctx) // blocks while another replica leads
	if err != nil {
		log.Fatal(err)
	}
	defer term.Resign(context.Background()) // frees the lease; other replicas notice within a poll

	// The decorator gives jobs a context that carries the term; here we add
	// it ourselves.
	ctx = elector.ContextWithTerm(ctx, term)
	err = store.Fenced(ctx, func(ctx context.Context, tx *sql.Tx) error {
		// Commits only while this term still holds the lease.
		_, err := tx.ExecContext(ctx, `UPDATE prices SET refreshed_at = NOW(6), by_token = ?`, term.Token())
		return err
	})
	if errors.Is(err, elector.ErrLeaseLost) {
		log.Printf("another replica took over; nothing written: %v", err)
	}
}

// New shares the application's pool: the store reserves its lease
// connections from it, and Close leaves it open.
func ExampleNew() {
	db, err := sql.Open("mysql", os.Getenv("MYSQL_DSN")+"?interpolateParams=true")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	store, err := mysqllease.New(db, mysqllease.WithTable("ops_leases"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	l, err := store.Get(context.Background(), "price-refresh")
	if err != nil {
		fmt.Println("no leader:", err)
		return
	}
	fmt.Printf("%s leads with token %d, written %v\n", l.Holder, l.Token, l.Written)
}

// PriceRefresher is a background job of an fx app: a type with Start and
// Stop.
type PriceRefresher struct{}

func NewPriceRefresher() *PriceRefresher { return &PriceRefresher{} }

func (*PriceRefresher) Start(context.Context) error { return nil }
func (*PriceRefresher) Stop(context.Context) error  { return nil }

// In an fx app, fxmodule.WithStore puts the MySQL store in place of the
// module's own (SQLite or PostgreSQL): every LeaderJob campaigns in the
// lease table. The job is built on every replica and runs on the one that
// holds its lease.
func Example_fx() {
	store, err := mysqllease.Open(context.Background(), os.Getenv("MYSQL_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close() // the app's Stop has freed the leases by then

	app := fx.New(
		fxmodule.Module(fxmodule.Config{}),
		fxmodule.WithStore(store),
		fx.Provide(NewPriceRefresher),
		fxmodule.LeaderJob[*PriceRefresher]("price-refresh"),
	)
	if err := app.Start(context.Background()); err != nil {
		log.Fatal(err)
	}
	<-app.Done() // SIGINT or SIGTERM
	if err := app.Stop(context.Background()); err != nil {
		log.Print(err)
	}
}
