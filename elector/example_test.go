package elector_test

import (
	"context"
	"fmt"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// Two candidates campaign for one lease; the second takes over as soon as the
// first resigns, with a larger fencing token.
func Example() {
	ctx := context.Background()
	store := elector.NewMemoryStore()
	cfg := elector.Config{TTL: 3 * time.Second}

	cfg.Holder = "replica-a"
	a, err := elector.New(store, "price-refresh", cfg)
	if err != nil {
		panic(err)
	}
	cfg.Holder = "replica-b"
	b, err := elector.New(store, "price-refresh", cfg)
	if err != nil {
		panic(err)
	}

	termA, _ := a.Campaign(ctx)
	leader, _ := a.Leader(ctx)
	fmt.Println("leader:", leader.Holder, "token", termA.Token())

	won := make(chan elector.Term)
	go func() {
		t, _ := b.Campaign(ctx) // waits: replica-a holds the lease
		won <- t
	}()
	_ = termA.Resign(ctx) // frees the lease and wakes replica-b at once
	termB := <-won
	leader, _ = b.Leader(ctx)
	fmt.Println("leader:", leader.Holder, "token", termB.Token())
	fmt.Println("replica-a's term ended:", termA.Err())
	_ = termB.Resign(ctx)

	// Output:
	// leader: replica-a token 1
	// leader: replica-b token 2
	// replica-a's term ended: term resigned
}

// Config rejects timings that leave no room for two renewals before the
// holder stops trusting its lease.
func ExampleNew_badConfig() {
	_, err := elector.New(elector.NewMemoryStore(), "sweep", elector.Config{TTL: 10 * time.Second, RenewInterval: 5 * time.Second})
	fmt.Println(err)
	// Output:
	// elector: Config.RenewInterval 5s leaves room for fewer than two renewals in the trust window 9s (TTL 10s minus margin 1s)
}

// A job that writes to a shared resource passes the term's token along, so the
// resource can refuse writes from a leader that has since been replaced.
func ExampleTermFromContext() {
	store := elector.NewMemoryStore()
	e, _ := elector.New(store, "webhooks", elector.Config{Holder: "replica-a"})
	term, _ := e.Campaign(context.Background())
	ctx := elector.ContextWithTerm(context.Background(), term)

	if t, ok := elector.TermFromContext(ctx); ok {
		fmt.Println("writing with fencing token", t.Token())
	}
	_ = term.Resign(context.Background())
	// Output:
	// writing with fencing token 1
}
