package etcdlease_test

import (
	"context"
	"errors"
	"log"
	"os"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/etcdlease"
	"github.com/leaderaware/leaderaware/fxmodule"
)

// Open a store, campaign for a lease and write to etcd under its fence.
// Every replica runs the same code; one at a time gets past Campaign.
func Example() {
	ctx := context.Background()
	store, err := etcdlease.Open(ctx, strings.Split(os.Getenv("ETCD_ENDPOINTS"), ","))
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
	defer term.Resign(context.Background()) // frees the lease and wakes the next candidate at once

	// The decorator gives jobs a context that carries the term; here we add
	// it ourselves.
	ctx = elector.ContextWithTerm(ctx, term)
	_, err = store.Fenced(ctx,
		clientv3.OpPut("prices/refreshed-by-token", strconv.FormatUint(term.Token(), 10)))
	if errors.Is(err, elector.ErrLeaseLost) {
		log.Print("another replica leads now; nothing was written")
	}
}

// New shares the application's client; Close leaves it open.
func ExampleNew() {
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"127.0.0.1:2379"},
		DialTimeout: 5 * time.Second,
		Username:    "leader",
		Password:    os.Getenv("ETCD_PASSWORD"),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	store, err := etcdlease.New(client, etcdlease.WithPrefix("ops/leases/"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	l, err := store.Get(context.Background(), "price-refresh")
	if err != nil {
		log.Print("no leader: ", err)
		return
	}
	log.Printf("%s leads with token %d, renewed at %v", l.Holder, l.Token, l.Written)
}

// PriceRefresher is a background job of an fx app: a type with Start and
// Stop.
type PriceRefresher struct{}

func NewPriceRefresher() *PriceRefresher { return &PriceRefresher{} }

func (*PriceRefresher) Start(context.Context) error { return nil }
func (*PriceRefresher) Stop(context.Context) error  { return nil }

// In an fx app, fxmodule.WithStore puts the etcd store in place of the
// module's own (SQLite or PostgreSQL): every LeaderJob campaigns in etcd.
// The job is built on every replica and runs on the one that holds its
// lease.
func Example_fx() {
	store, err := etcdlease.Open(context.Background(), strings.Split(os.Getenv("ETCD_ENDPOINTS"), ","))
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
