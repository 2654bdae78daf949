package decorator_test

import (
	"context"
	"fmt"
	"log"
	"net/http"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

// PriceRefresher is the interface an application decorates its job as.
type PriceRefresher interface {
	Start(context.Context) error
	Stop(context.Context) error
}

func ExampleStatusOf() {
	e, err := elector.New(elector.NewMemoryStore(), "prices", elector.Config{Holder: "replica-1"})
	if err != nil {
		log.Fatal(err)
	}
	inner := &priceRefresher{started: make(chan struct{})}
	job := decorator.Decorate[PriceRefresher](inner, e)

	// A liveness check: it fails only while the job may run after its term
	// was abandoned. Readiness must not depend on leadership.
	mux := http.NewServeMux()
	mux.HandleFunc("/livez", func(w http.ResponseWriter, r *http.Request) {
		if err := decorator.HealthCheck(job)(r); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	})

	ctx := context.Background()
	if err := job.Start(ctx); err != nil {
		log.Fatal(err)
	}
	<-inner.started
	status, _ := decorator.StatusOf(job) // whatever type Decorate returned
	s := status.Snapshot()
	fmt.Printf("leading %v: lease %q, holder %s, token %d; healthy: %v\n",
		status.Leading(), s.Lease, s.Holder, s.Token, status.Healthy(nil) == nil)
	if err := job.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("leading:", status.Leading())
	// Output:
	// refreshing prices as leader of "prices", token 1
	// leading true: lease "prices", holder replica-1, token 1; healthy: true
	// stopped refreshing prices
	// leading: false
}
