package decorator_test

import (
	"context"
	"fmt"
	"log"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

// priceRefresher is an ordinary background job: it knows nothing of leaders.
type priceRefresher struct{ started chan struct{} }

func (p *priceRefresher) Start(ctx context.Context) error {
	if l, ok := elector.LeaseFromContext(ctx); ok {
		fmt.Printf("refreshing prices as leader of %q, token %d\n", l.Name, l.Token)
	}
	close(p.started)
	return nil
}

func (p *priceRefresher) Stop(context.Context) error {
	fmt.Println("stopped refreshing prices")
	return nil
}

func ExampleDecorate() {
	store := elector.NewMemoryStore() // sqlitelease or pglease in production
	e, err := elector.New(store, "prices", elector.Config{Holder: "replica-1"})
	if err != nil {
		log.Fatal(err)
	}
	inner := &priceRefresher{started: make(chan struct{})}
	job := decorator.Decorate[decorator.Job](inner, e,
		decorator.WithMiddleware(decorator.Recover()),
		decorator.WithHooks(decorator.Hooks{
			OnElected: func(_ context.Context, t elector.Term) { fmt.Println("elected, token", t.Token()) },
			OnDemoted: func(_ context.Context, t elector.Term, cause error) { fmt.Println("demoted:", cause) },
		}))

	ctx := context.Background()
	if err := job.Start(ctx); err != nil { // returns at once: the campaign runs in the background
		log.Fatal(err)
	}
	<-inner.started
	if err := job.Stop(ctx); err != nil { // stops the job, then frees the lease
		log.Fatal(err)
	}
	fmt.Println(job)
	// Output:
	// elected, token 1
	// refreshing prices as leader of "prices", token 1
	// stopped refreshing prices
	// demoted: term resigned
	// leader job *decorator_test.priceRefresher (lease "prices")
}

// hello is a job that says hello.
type hello struct{}

func (hello) Start(context.Context) error { fmt.Println("  hello"); return nil }
func (hello) Stop(context.Context) error  { return nil }

// around is a middleware that prints its name around Start.
func around(name string) decorator.Middleware {
	return func(next decorator.Job) decorator.Job { return aroundJob{next, name} }
}

type aroundJob struct {
	decorator.Job
	name string
}

func (a aroundJob) Start(ctx context.Context) error {
	fmt.Println("enter", a.name)
	defer fmt.Println("leave", a.name)
	return a.Job.Start(ctx)
}

func (a aroundJob) Unwrap() decorator.Job { return a.Job }

func ExampleChain() {
	base := decorator.NewChain(around("outer"), around("middle"))
	withInner := base.Append(around("inner")) // base is unchanged

	_ = base.Then(hello{}).Start(context.Background())
	fmt.Println("--")
	_ = withInner.Then(hello{}).Start(context.Background())
	// Output:
	// enter outer
	// enter middle
	//   hello
	// leave middle
	// leave outer
	// --
	// enter outer
	// enter middle
	// enter inner
	//   hello
	// leave inner
	// leave middle
	// leave outer
}
