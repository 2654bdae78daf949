package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/jobs"
)

// A worker loop that runs only on the leader: Run starts it when this
// replica wins a term, with the term in its context, and ends its context
// when the term ends or the decorated job stops.
func ExampleRun() {
	store := elector.NewMemoryStore() // sqlitelease or pglease in production
	e, err := elector.New(store, "orders", elector.Config{Holder: "replica-1"})
	if err != nil {
		log.Fatal(err)
	}
	leading := make(chan struct{})
	consumer := jobs.Run(func(ctx context.Context) error {
		l, _ := elector.LeaseFromContext(ctx)
		fmt.Printf("consuming orders as %s, token %d\n", l.Holder, l.Token)
		close(leading)
		<-ctx.Done() // a real loop would receive messages until then
		fmt.Println("consumer stopped")
		return ctx.Err()
	}, jobs.WithName("orders"))
	job := decorator.Decorate(consumer, e)

	ctx := context.Background()
	if err := job.Start(ctx); err != nil { // returns at once: the campaign runs in the background
		log.Fatal(err)
	}
	<-leading
	if err := job.Stop(ctx); err != nil { // ends fn's context, waits for fn, then frees the lease
		log.Fatal(err)
	}
	_, err = store.Get(ctx, "orders")
	fmt.Println("lease free:", errors.Is(err, elector.ErrNoLease))
	// Output:
	// consuming orders as replica-1, token 1
	// consumer stopped
	// lease free: true
}
