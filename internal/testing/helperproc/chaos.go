package helperproc

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/leaseterm"
	"github.com/leaderaware/leaderaware/internal/testing/stepclock"
	"github.com/leaderaware/leaderaware/jobs"
	"github.com/leaderaware/leaderaware/pglease"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// chaosWrite writes one row for the lease l inside a fenced transaction:
// with the store's Fenced (the term that ctx carries), or, if zombie, with
// Fenced for the bare lease l (via leaseterm), which asks the database
// even after the term has ended.
type chaosWrite func(ctx context.Context, l elector.Lease, n int64, zombie bool) error

// chaosMain is the mode chaos, the process of the chaos tests in
// tests/chaos. It runs one decorated [jobs.Every] job that, while this process leads,
// writes one (token, holder, n, time) row every -every through a fenced
// write: [sqlitelease.Store.Fenced] into the table -table of the lease file
// (created if missing, so that a process started on a new file has it), or
// [pglease.Store.Fenced] into -table of the schema -schema. It prints its
// transitions, one line each (times are this host's wall clock, never
// stepped, in Unix nanoseconds):
//
//	OPEN <holder> <inode>            the store is open on the SQLite file with this inode (0 on PostgreSQL)
//	START <holder> <token>           elected: the job is about to start
//	RUN <holder> <token> <t>         the inner job's Start is called at t
//	WROTE <holder> <token> <n>       fenced write number n of this process committed
//	HALT <holder> <token> <t1> <t2>  the inner job's Stop was called at t1 and returned at t2
//	STOP <holder> <token> <cause>    the job has stopped and the term is over
//	REFUSED <holder> <token>         the store refused a fenced write: the term was no longer current or trusted
//	ZOMBIE <holder> <token> <result> a write with the token of the term that just ended: refused or committed
//	STEP <holder> <offset>           the wall clock was stepped; offset is its total step now
//	SUSPEND <holder> <token> <d> <t> a suspend of d was simulated at t, while leading term token (0: not leading, none simulated)
//	GONE <holder> <message>          the store reports its file deleted or replaced, and it cannot go on (its health check fails): the process exits (status 3)
//	ERROR <holder> <message>         a job, store or elector error
//	EXIT <holder>                    stopped gracefully after SIGTERM
//
// With -leases N > 1 it also campaigns for N-1 more leases, all balanced
// by one placement.Group, and prints their lines (see balance).
//
// The test creates the PostgreSQL table before it starts any process.
// SIGTERM and SIGINT stop the job gracefully; the test also sends SIGKILL (a
// crash) and SIGSTOP/SIGCONT (a pause, like a long GC pause). On the clock
// the store and its elector read (a stepclock.Clock), SIGUSR1 steps the wall
// clock forward by -stepby and SIGUSR2 back, as an NTP step would
// (-wallstep is the step a restarted process starts with: its host's
// clock), and SIGPWR simulates a suspend of -suspend while the inner job
// runs: the elapsed-time clock jumps while Go's timers do not, as after a
// machine's resume.
func chaosMain(args []string) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	sf := addStoreFlags(fs) // -table is in -schema too
	var (
		table  = fs.String("table", "chaos_writes", "table the job writes its rows into")
		name   = fs.String("name", "chaos", "lease name")
		holder = fs.String("holder", "", "holder name")
		ttl    = fs.Duration("ttl", 1500*time.Millisecond, "lease TTL")
		renew  = fs.Duration("renew", 500*time.Millisecond, "renew interval")
		retry  = fs.Duration("retry", 500*time.Millisecond, "retry interval")
		every  = fs.Duration("every", 50*time.Millisecond, "write period")
		hold   = fs.Duration("hold", 0, "how long each fenced transaction sleeps after its insert, before it commits")
		step   = fs.Duration("wallstep", 0, "step of the wall clock at start (the clock of this process's host)")
		stepBy = fs.Duration("stepby", time.Hour, "size of the wall-clock step of SIGUSR1 (forward) and SIGUSR2 (back)")
		susp   = fs.Duration("suspend", 3*time.Second, "length of the suspend that SIGPWR simulates")
		leases = fs.Int("leases", 1, "leases of this process: more than 1 balances the chaos lease and the others in one placement.Group (see balance)")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *holder == "" {
		return errors.New("need -holder")
	}

	// Before OPEN, so that the test's signals never find the default
	// action (exit) in place.
	sig := make(chan os.Signal, 8)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPWR)
	defer signal.Stop(sig)
	clk := stepclock.New()
	clk.Step(*step)
	out := &lineWriter{w: os.Stdout}
	s, err := sf.open(clk)
	if err != nil {
		return err
	}
	defer s.close()
	var (
		write chaosWrite
		inode uint64
		// healthy is the store's health check: a store that follows its
		// path to a restored file goes on after an error of the file.
		healthy = func() error { return nil }
	)
	if s.pg != nil {
		write = pgWriter(s.pg, pgx.Identifier{*sf.schema, *table}.Sanitize(), *hold)
	} else {
		inode = inodeOf(*sf.db)
		if _, err := s.sqlite.DB().ExecContext(context.Background(), createSQL(*table)); err != nil {
			return err
		}
		write = sqliteWriter(s.sqlite, *table, *hold)
		healthy = func() error { return s.sqlite.Healthy(nil) }
	}

	// gone is closed when the store reports that its file was deleted or
	// replaced: the process then exits, as an application would crash on
	// it and be restarted on the new file.
	gone := make(chan struct{})
	var goneOnce sync.Once
	checkGone := func(err error) {
		if errors.Is(err, sqlitelease.ErrFileChanged) && healthy() != nil {
			goneOnce.Do(func() {
				out.printf("GONE %s %s", *holder, oneLine(err))
				close(gone)
			})
		}
	}
	fail := func(_ context.Context, err error) {
		out.printf("ERROR %s %s", *holder, oneLine(err))
		checkGone(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e, bal, err := newBalance(s.store, *name, *leases, elector.Config{TTL: *ttl, RenewInterval: *renew, RetryInterval: *retry, Holder: *holder}, out, logger, fail,
		func() uint64 { return inodeOf(*sf.db) })
	if err != nil {
		return err
	}
	out.printf("OPEN %s %d", *holder, inode)

	var (
		writes  atomic.Int64  // fenced writes tried, numbering the rows
		leading atomic.Uint64 // the token of the term whose inner job runs, 0 if none
	)
	writer := jobs.Every(*every, func(ctx context.Context) error {
		l, ok := elector.LeaseFromContext(ctx)
		if !ok {
			return errors.New("the job's context carries no lease")
		}
		n := writes.Add(1)
		err := write(ctx, l, n, false)
		if err == nil {
			out.printf("WROTE %s %d %d", *holder, l.Token, n)
		}
		if refused(err) {
			out.printf("REFUSED %s %d", *holder, l.Token)
			checkGone(err)
			return nil
		}
		return err
	}, jobs.WithImmediate(), jobs.WithName("chaos writer"), jobs.WithErrorHandler(fail))
	job := &chaosJob{inner: writer, out: out, holder: *holder, leading: &leading}
	leader := decorator.Decorate[decorator.Job](job, e,
		decorator.WithLogger(logger),
		decorator.WithHooks(decorator.Hooks{
			OnElected: func(_ context.Context, t elector.Term) {
				// The store follows its path to a restored file: name the
				// file of the term.
				if now := inodeOf(*sf.db); now != 0 && now != inode {
					inode = now
					out.printf("OPEN %s %d", *holder, inode)
				}
				out.printf("START %s %d", *holder, t.Token())
			},
			OnDemoted: func(ctx context.Context, t elector.Term, cause error) {
				out.printf("STOP %s %d %s", *holder, t.Token(), oneLine(cause))
				bal.demoted(t, *name)
				checkGone(cause)
				// A zombie: a writer that missed the end of its term (a job
				// ignoring its context, or one that was paused) writes with the
				// old token. The term is over and resigned: the fence must
				// refuse it.
				l, ok := elector.LeaseFromContext(ctx)
				if !ok {
					fail(ctx, errors.New("the OnDemoted context carries no lease"))
					return
				}
				switch err := write(ctx, l, writes.Add(1), true); {
				case err == nil:
					out.printf("ZOMBIE %s %d committed", *holder, l.Token)
				case refused(err):
					out.printf("ZOMBIE %s %d refused", *holder, l.Token)
				default:
					fail(ctx, fmt.Errorf("zombie write: %w", err))
				}
			},
			OnError: fail,
		}))

	if err := bal.start(); err != nil {
		return err
	}
	if err := leader.Start(context.Background()); err != nil {
		return err
	}
	stepped := *step
	for {
		select {
		case <-gone:
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := errors.Join(leader.Stop(ctx), bal.stop(ctx)); err != nil {
				fmt.Fprintln(os.Stderr, "chaos: stop after the file changed:", err)
			}
			cancel()
			if err := s.close(); err != nil {
				fmt.Fprintln(os.Stderr, "chaos: close after the file changed:", err)
			}
			os.Exit(3)
		case s := <-sig:
			switch s {
			case syscall.SIGUSR1, syscall.SIGUSR2:
				d := *stepBy
				if s == syscall.SIGUSR2 {
					d = -d
				}
				clk.Step(d)
				stepped += d
				out.printf("STEP %s %v", *holder, stepped)
			case syscall.SIGPWR:
				// Only a leader: a candidate's watch would complete at once,
				// in a world where the holder had not gone on renewing
				// meanwhile, which no real suspend makes.
				token := leading.Load()
				if token != 0 {
					clk.Suspend(*susp)
				}
				out.printf("SUSPEND %s %d %v %d", *holder, token, *susp, time.Now().UnixNano())
			default:
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := bal.drain(ctx); err != nil {
					fail(ctx, fmt.Errorf("drain before the stop: %w", err))
				}
				err := errors.Join(leader.Stop(ctx), bal.stop(ctx))
				out.printf("EXIT %s", *holder)
				return err
			}
		}
	}
}

// chaosJob is the inner job: it prints when its Start is called and when its
// Stop returns, so that the test sees when the job may run.
type chaosJob struct {
	inner   *jobs.EveryJob
	out     *lineWriter
	holder  string
	leading *atomic.Uint64
	token   uint64 // of the term that started it; set by Start, read by Stop (the decorator calls them in turn)
}

func (j *chaosJob) Start(ctx context.Context) error {
	t, ok := elector.TermFromContext(ctx)
	if !ok {
		return errors.New("the start context carries no term")
	}
	j.token = t.Token()
	j.leading.Store(j.token)
	j.out.printf("RUN %s %d %d", j.holder, j.token, time.Now().UnixNano())
	return j.inner.Start(ctx)
}

func (j *chaosJob) Stop(ctx context.Context) error {
	called := time.Now()
	err := j.inner.Stop(ctx)
	if err == nil {
		j.leading.Store(0)
		j.out.printf("HALT %s %d %d %d", j.holder, j.token, called.UnixNano(), time.Now().UnixNano())
	}
	return err
}

// sqliteWriter inserts rows stamped with this host's clock (time.Now, which
// the steps of clk do not move), read inside the transaction, which holds the
// file's write lock.
func sqliteWriter(s *sqlitelease.Store, table string, hold time.Duration) chaosWrite {
	insert := `INSERT INTO "` + table + `" (token, holder, n, at_us) VALUES (?, ?, ?, ?)`
	return func(ctx context.Context, l elector.Lease, n int64, zombie bool) error {
		fn := func(ctx context.Context, tx *sql.Tx) error {
			// The table may be missing from a new file that the store
			// followed its path to.
			if _, err := tx.ExecContext(ctx, createSQL(table)); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, insert, int64(l.Token), l.Holder, n, time.Now().UnixMicro()); err != nil {
				return err
			}
			return sleep(ctx, hold)
		}
		if zombie {
			return s.Fenced(leaseterm.Context(ctx, l), fn)
		}
		return s.Fenced(ctx, fn)
	}
}

// createSQL creates the table the job writes its rows into, if missing.
func createSQL(table string) string {
	return `CREATE TABLE IF NOT EXISTS "` + table + `" (
		seq    INTEGER PRIMARY KEY AUTOINCREMENT,
		token  INTEGER NOT NULL,
		holder TEXT    NOT NULL,
		n      INTEGER NOT NULL,
		at_us  INTEGER NOT NULL
	) STRICT`
}

// inodeOf returns the inode of the file at path, 0 if there is none.
func inodeOf(path string) uint64 {
	if fi, err := os.Stat(path); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			return st.Ino
		}
	}
	return 0
}

// pgWriter inserts rows stamped with the server's clock_timestamp(). The
// self-conflicting table lock serializes the writers, so that the identity
// column, assigned under it, follows commit order.
func pgWriter(s *pglease.Store, table string, hold time.Duration) chaosWrite {
	lock := `LOCK TABLE ` + table + ` IN SHARE ROW EXCLUSIVE MODE`
	insert := `INSERT INTO ` + table + ` (token, holder, n) VALUES ($1, $2, $3)`
	return func(ctx context.Context, l elector.Lease, n int64, zombie bool) error {
		fn := func(ctx context.Context, tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, lock); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, insert, int64(l.Token), l.Holder, n); err != nil {
				return err
			}
			return sleep(ctx, hold)
		}
		if zombie {
			return s.Fenced(leaseterm.Context(ctx, l), fn)
		}
		return s.Fenced(ctx, fn)
	}
}

// refused reports whether err is a store's refusal of a fenced write: the
// term is no longer current (ErrLeaseLost), or no longer trusted by this
// process (ErrLeaseExpired, which pglease returns once the term's trust
// window has closed).
func refused(err error) bool {
	return errors.Is(err, elector.ErrLeaseLost) || errors.Is(err, elector.ErrLeaseExpired)
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
