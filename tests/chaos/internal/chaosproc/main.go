// Command chaosproc is the helper process of the chaos tests in tests/chaos.
// It runs one decorated [jobs.Every] job that, while this process leads,
// writes one (token, holder, time) row every -every through a fenced write:
// [sqlitelease.Store.Fenced] into the table -table of the lease file, or
// [pglease.Store.Fenced] into -table of the schema -schema. It prints its
// transitions, one line each:
//
//	START <holder> <token>          elected: the job is about to start
//	WROTE <holder> <token>          the term's first fenced write committed
//	STOP <holder> <token> <cause>   the job has stopped and the term is over
//	REFUSED <holder> <token>        the store refused a fenced write: the term was no longer current
//	ZOMBIE <holder> <token> <result> a write with the token of the term that just ended: refused or committed
//	ERROR <holder> <message>        a job, store or elector error
//	EXIT <holder>                   stopped gracefully after SIGTERM
//
// The test creates the tables before it starts any chaosproc. SIGTERM and
// SIGINT stop the job gracefully; the test also sends SIGKILL (a crash) and
// SIGSTOP/SIGCONT (a pause, like a long GC pause).
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/jobs"
	"github.com/leaderaware/leaderaware/pglease"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "chaosproc:", err)
		os.Exit(1)
	}
}

// writeFunc writes one row for the lease l inside a fenced transaction:
// with the store's Fenced (the term that ctx carries), or, if zombie, with
// FencedLease(l), which asks the database even after the term has ended.
type writeFunc func(ctx context.Context, l elector.Lease, zombie bool) error

func run() error {
	var (
		dbPath = flag.String("db", "", "SQLite file")
		pgDSN  = flag.String("pg", "", "PostgreSQL DSN (instead of -db)")
		schema = flag.String("schema", pglease.DefaultSchema, "PostgreSQL schema of the lease table and of -table")
		table  = flag.String("table", "chaos_writes", "table the job writes its rows into")
		name   = flag.String("name", "chaos", "lease name")
		holder = flag.String("holder", "", "holder name")
		ttl    = flag.Duration("ttl", 1500*time.Millisecond, "lease TTL")
		renew  = flag.Duration("renew", 500*time.Millisecond, "renew interval")
		retry  = flag.Duration("retry", 500*time.Millisecond, "retry interval")
		every  = flag.Duration("every", 50*time.Millisecond, "write period")
		hold   = flag.Duration("hold", 0, "how long each fenced transaction sleeps after its insert, before it commits")
	)
	flag.Parse()
	if *holder == "" {
		return errors.New("need -holder")
	}

	var (
		store elector.Store
		write writeFunc
	)
	switch {
	case *pgDSN != "":
		s, err := pglease.Open(context.Background(), *pgDSN, pglease.WithSchema(*schema))
		if err != nil {
			return err
		}
		defer s.Close()
		store, write = s, pgWriter(s, pgx.Identifier{*schema, *table}.Sanitize(), *hold)
	case *dbPath != "":
		s, err := sqlitelease.Open(*dbPath)
		if err != nil {
			return err
		}
		defer s.Close()
		store, write = s, sqliteWriter(s, *table, *hold)
	default:
		return errors.New("need -db or -pg")
	}

	e, err := elector.New(store, *name, elector.Config{TTL: *ttl, RenewInterval: *renew, RetryInterval: *retry, Holder: *holder})
	if err != nil {
		return err
	}
	out := &lineWriter{w: os.Stdout}
	fail := func(_ context.Context, err error) { out.printf("ERROR %s %s", *holder, oneLine(err)) }
	var wrote atomic.Uint64 // the last token that printed WROTE
	job := jobs.Every(*every, func(ctx context.Context) error {
		l, ok := elector.LeaseFromContext(ctx)
		if !ok {
			return errors.New("the job's context carries no lease")
		}
		err := write(ctx, l, false)
		if err == nil && wrote.Swap(l.Token) != l.Token {
			out.printf("WROTE %s %d", *holder, l.Token)
		}
		if errors.Is(err, elector.ErrLeaseLost) {
			out.printf("REFUSED %s %d", *holder, l.Token)
			return nil
		}
		return err
	}, jobs.WithImmediate(), jobs.WithName("chaos writer"), jobs.WithErrorHandler(fail))
	leader := decorator.Decorate[decorator.Job](job, e,
		decorator.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		decorator.WithHooks(decorator.Hooks{
			OnElected: func(_ context.Context, t elector.Term) { out.printf("START %s %d", *holder, t.Token()) },
			OnDemoted: func(ctx context.Context, t elector.Term, cause error) {
				out.printf("STOP %s %d %s", *holder, t.Token(), oneLine(cause))
				// A zombie: a writer that missed the end of its term (a job
				// ignoring its context, or one that was paused) writes with the
				// old token. The term is over and resigned: the fence must
				// refuse it.
				l, ok := elector.LeaseFromContext(ctx)
				if !ok {
					fail(ctx, errors.New("the OnDemoted context carries no lease"))
					return
				}
				switch err := write(ctx, l, true); {
				case err == nil:
					out.printf("ZOMBIE %s %d committed", *holder, l.Token)
				case errors.Is(err, elector.ErrLeaseLost):
					out.printf("ZOMBIE %s %d refused", *holder, l.Token)
				default:
					fail(ctx, fmt.Errorf("zombie write: %w", err))
				}
			},
			OnError: fail,
		}))

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	if err := leader.Start(context.Background()); err != nil {
		return err
	}
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = leader.Stop(ctx)
	out.printf("EXIT %s", *holder)
	return err
}

// sqliteWriter inserts rows stamped with this process's clock, read inside
// the transaction, which holds the file's write lock.
func sqliteWriter(s *sqlitelease.Store, table string, hold time.Duration) writeFunc {
	insert := `INSERT INTO "` + table + `" (token, holder, at_us) VALUES (?, ?, ?)`
	return func(ctx context.Context, l elector.Lease, zombie bool) error {
		fn := func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, insert, int64(l.Token), l.Holder, time.Now().UnixMicro()); err != nil {
				return err
			}
			return sleep(ctx, hold)
		}
		if zombie {
			return s.FencedLease(ctx, l, fn)
		}
		return s.Fenced(ctx, fn)
	}
}

// pgWriter inserts rows stamped with the server's clock_timestamp(). The
// self-conflicting table lock serializes the writers, so that the identity
// column, assigned under it, follows commit order.
func pgWriter(s *pglease.Store, table string, hold time.Duration) writeFunc {
	lock := `LOCK TABLE ` + table + ` IN SHARE ROW EXCLUSIVE MODE`
	insert := `INSERT INTO ` + table + ` (token, holder) VALUES ($1, $2)`
	return func(ctx context.Context, l elector.Lease, zombie bool) error {
		fn := func(ctx context.Context, tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, lock); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, insert, int64(l.Token), l.Holder); err != nil {
				return err
			}
			return sleep(ctx, hold)
		}
		if zombie {
			return s.FencedLease(ctx, l, fn)
		}
		return s.Fenced(ctx, fn)
	}
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// oneLine returns err's message on one line.
func oneLine(err error) string {
	if err == nil {
		return "<nil>"
	}
	return strings.ReplaceAll(err.Error(), "\n", " | ")
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
