// Command leaderproc runs one decorated job against a SQLite file or a
// PostgreSQL database and prints its transitions, one line each:
//
//	START <holder> <token>
//	STOP <holder> <token>
//	EXIT <holder>
//
// The multi-process tests in package tests build it, start several copies,
// kill or stop them and read the lines. SIGTERM and SIGINT stop the job
// gracefully; SIGKILL is a crash.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/pglease"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "leaderproc:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		dbPath = flag.String("db", "", "SQLite file")
		pgDSN  = flag.String("pg", "", "PostgreSQL DSN (instead of -db)")
		schema = flag.String("schema", pglease.DefaultSchema, "PostgreSQL schema of the lease table")
		name   = flag.String("name", "job", "lease name")
		holder = flag.String("holder", "", "holder name")
		ttl    = flag.Duration("ttl", 1500*time.Millisecond, "lease TTL")
		renew  = flag.Duration("renew", 500*time.Millisecond, "renew interval")
		retry  = flag.Duration("retry", 500*time.Millisecond, "retry interval")
	)
	flag.Parse()

	var store elector.Store
	switch {
	case *pgDSN != "":
		s, err := pglease.Open(context.Background(), *pgDSN, pglease.WithSchema(*schema))
		if err != nil {
			return err
		}
		defer s.Close()
		store = s
	case *dbPath != "":
		s, err := sqlitelease.Open(*dbPath)
		if err != nil {
			return err
		}
		defer s.Close()
		store = s
	default:
		return fmt.Errorf("need -db or -pg")
	}

	e, err := elector.New(store, *name, elector.Config{TTL: *ttl, RenewInterval: *renew, RetryInterval: *retry, Holder: *holder})
	if err != nil {
		return err
	}
	out := &lineWriter{w: os.Stdout}
	job := decorator.Decorate[decorator.Job](&printJob{out: out, holder: *holder}, e,
		decorator.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))))

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	if err := job.Start(context.Background()); err != nil {
		return err
	}
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = job.Stop(ctx)
	out.printf("EXIT %s", *holder)
	return err
}

// printJob prints when it starts and stops, with its term's token.
type printJob struct {
	out    *lineWriter
	holder string
	token  uint64
}

func (j *printJob) Start(ctx context.Context) error {
	t, ok := elector.TermFromContext(ctx)
	if !ok {
		return fmt.Errorf("no term in the start context")
	}
	j.token = t.Token()
	j.out.printf("START %s %d %d", j.holder, j.token, time.Now().UnixNano())
	return nil
}

func (j *printJob) Stop(context.Context) error {
	j.out.printf("STOP %s %d %d", j.holder, j.token, time.Now().UnixNano())
	return nil
}

// lineWriter writes whole lines at once, so lines never interleave.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format+"\n", args...)
}
