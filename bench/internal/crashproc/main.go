// Command crashproc is the lease holder of BenchmarkSQLiteCrashFailover: it
// opens the SQLite file -db, campaigns for the lease -lease with TTL -ttl,
// prints one line once it leads,
//
//	leading <token>
//
// and holds the term, renewing it, until SIGTERM (then it resigns, closes
// the store and exits 0) or until its stdin closes (the benchmark ended).
// SIGKILL is the crash the benchmark measures.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "crashproc:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		db    = flag.String("db", "", "SQLite file")
		lease = flag.String("lease", "crash", "lease name")
		ttl   = flag.Duration("ttl", elector.DefaultTTL, "lease TTL")
	)
	flag.Parse()
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)

	s, err := sqlitelease.Open(*db)
	if err != nil {
		return err
	}
	e, err := elector.New(s, *lease, elector.Config{TTL: *ttl, Holder: fmt.Sprintf("crashproc-%d", os.Getpid())})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	term, err := e.Campaign(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("leading %d\n", term.Token())

	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-sigs:
		if err := term.Resign(ctx); err != nil {
			return err
		}
		return s.Close()
	case <-eof:
		term.Abandon()
		return s.Close()
	}
}
