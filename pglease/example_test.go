package pglease_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/pglease"
)

// Open a store, campaign for a lease and write under its fence. Every
// replica runs the same code; one at a time gets past Campaign.
func Example() {
	ctx := context.Background()
	store, err := pglease.Open(ctx, os.Getenv("DATABASE_URL"))
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
	err = store.Fenced(ctx, func(ctx context.Context, tx pgx.Tx) error {
		// Commits only while this term still holds the lease.
		_, err := tx.Exec(ctx, `UPDATE prices SET refreshed_at = now(), by_token = $1`, int64(term.Token()))
		return err
	})
	if err != nil {
		log.Printf("write refused: %v", err) // errors.Is(err, elector.ErrLeaseLost) after a takeover
	}
}

// New shares the application's pool; Close leaves it open.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := pglease.New(ctx, pool, pglease.WithSchema("ops"), pglease.WithTable("leases"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	l, err := store.Get(ctx, "price-refresh")
	if err != nil {
		fmt.Println("no leader:", err)
		return
	}
	fmt.Printf("%s leads with token %d, last renewed at %v\n", l.Holder, l.Token, l.Written)
}
