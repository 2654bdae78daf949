package fxmodule_test

import (
	"context"
	"fmt"
	"log"
	"net/http"

	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/fxmodule"
)

// ExampleRegistry asks the app's Registry which jobs this replica leads,
// who leads a lease, and whether the app is healthy and ready. A status
// page or probe handler gets it the same way, by asking for
// *fxmodule.Registry.
func ExampleRegistry() {
	started := make(chan struct{})
	var reg *fxmodule.Registry
	app := fx.New(
		fx.NopLogger,
		fxmodule.Module(fxmodule.Config{Elector: elector.Config{Holder: "replica-1"}}),
		fxmodule.WithStore(elector.NewMemoryStore()),
		fx.Provide(func() Reporter { return &reporter{started: started} }),
		fxmodule.LeaderJob[Reporter]("reporter"),
		fx.Populate(&reg),
	)
	ctx := context.Background()
	if err := app.Start(ctx); err != nil {
		log.Fatal(err)
	}
	<-started
	for _, job := range reg.Jobs() {
		fmt.Printf("%s: leading %v, token %d\n", job.Lease, job.Leading, job.Token)
	}
	if l, err := reg.Leader(ctx, "reporter"); err == nil {
		fmt.Println("leader:", l.Holder)
	}
	req, _ := http.NewRequest("GET", "/healthz", nil)
	fmt.Println("healthy:", reg.Healthy(req) == nil, "ready:", reg.Ready(req) == nil)
	if err := app.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// started
	// reporter: leading true, token 1
	// leader: replica-1
	// healthy: true ready: true
	// stopped
}
