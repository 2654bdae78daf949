package sqlitelease_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// Example elects a leader on an SQLite file, lets its job write only while
// it leads, and shows the write refused once the term is over.
func Example() {
	dir, err := os.MkdirTemp("", "sqlitelease-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, err := sqlitelease.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	ctx := context.Background()
	// The job keeps its own table in the same file.
	if _, err := store.DB().ExecContext(ctx, `CREATE TABLE prices (sym TEXT PRIMARY KEY, cents INTEGER)`); err != nil {
		log.Fatal(err)
	}

	e, err := elector.New(store, "price-refresh", elector.Config{TTL: 10 * time.Second, Holder: "replica-1"})
	if err != nil {
		log.Fatal(err)
	}
	term, err := e.Campaign(ctx)
	if err != nil {
		log.Fatal(err)
	}
	leader, _ := e.Leader(ctx)
	fmt.Printf("%s leads; its token is the fencing token: %v\n", leader.Holder, leader.Token == term.Token())

	// The decorator package hands jobs a context like this one.
	jobCtx := elector.ContextWithTerm(ctx, term)
	write := func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO prices VALUES ('ACME', 4200)`)
		return err
	}
	fmt.Println("write while leading:", store.Fenced(jobCtx, write))

	if err := term.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	err = store.Fenced(jobCtx, write)
	fmt.Println("write after resigning refused:", errors.Is(err, elector.ErrLeaseLost))
	// Output:
	// replica-1 leads; its token is the fencing token: true
	// write while leading: <nil>
	// write after resigning refused: true
}
