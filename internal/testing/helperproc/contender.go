package helperproc

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/leaseterm"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// maxExamples is how many error texts of each class a summary keeps.
const maxExamples = 5

// contenderSummary is the one line the mode contender prints. Counts are per operation
// kind; Busy and Other count errors that callers must never see.
type contenderSummary struct {
	ID        int   `json:"id"`
	ElapsedNS int64 `json:"elapsed_ns"` // from the start of the loop to the end of the last operation
	LateNS    int64 `json:"late_ns"`    // how long after -start the loop began (Open took that long)

	Ops       int64    `json:"ops"`        // every store call, Open and Close included
	Acquired  int64    `json:"acquired"`   // TryAcquire that started a term
	TakenOver int64    `json:"taken_over"` // of which the takeovers of a watched lease
	Held      int64    `json:"held"`       // TryAcquire → ErrHeld
	Renewed   int64    `json:"renewed"`    // Renew that extended the term
	Lost      int64    `json:"lost"`       // Renew or fenced write → ErrLeaseLost
	Released  int64    `json:"released"`   // Release
	Got       int64    `json:"got"`        // Get that found a live holder
	NoLease   int64    `json:"no_lease"`   // Get → ErrNoLease
	Written   int64    `json:"written"`    // fenced write that committed
	Abandoned int64    `json:"abandoned"`  // held leases dropped without Release
	StaleLost int64    `json:"stale_lost"` // Renew or fenced write of an abandoned, superseded term → ErrLeaseLost
	MaxOpNS   int64    `json:"max_op_ns"`  // slowest single operation
	Busy      int64    `json:"busy"`       // errors that show SQLITE_BUSY or SQLITE_LOCKED
	Other     int64    `json:"other"`      // unexpected errors that are not busy
	BusyEx    []string `json:"busy_examples,omitempty"`
	OtherEx   []string `json:"other_examples,omitempty"`
}

// contenderMain is the mode contender: it hammers one SQLite lease file the
// way candidates and leaders do, for BenchmarkSQLiteContention
// (bench/contention_test.go), which runs several copies at once on one
// fresh file.
//
// It opens the file with sqlitelease.Open, waits until -start (so that all
// copies begin together), and then, until -duration has passed, runs
// -workers goroutines that each loop over -leases lease names, holding each
// as their own holder:
//
//   - a lease the worker does not hold: TryAcquire (most get ErrHeld), or
//     now and then Get. Like an elector, the worker watches the lease each
//     of them reports: once it has seen one Version unchanged for the
//     holder's TTL (and its own), by its own clock, it passes that lease
//     as observed, and takes it over;
//   - a lease it holds: Renew (ErrLeaseLost if another worker took it over
//     meanwhile), a short fenced write (Store.Fenced for the bare lease, via leaseterm, with one INSERT
//     into the table contender_writes), now and then Release, and rarely
//     abandon it (as a crashed or paused leader would: no release, no
//     renewal);
//   - a lease it abandoned more than TTL ago: Get, and if a later term has
//     superseded the abandoned one (a larger token, or the lease released),
//     Renew or a fenced write with the abandoned term, which must fail with
//     ErrLeaseLost (a success counts as an other error: a stale term was
//     honoured). While nobody has taken it over, the store rightly still
//     honours it; it is checked again later.
//
// Every operation gets its own -op-timeout context (longer than the store's
// busy timeout), so a busy database reaches a caller only if the store gave
// up on it. Every error is classified: expected (errors.Is ErrHeld,
// ErrLeaseLost or ErrNoLease), busy (an SQLite BUSY or LOCKED code, or error
// text that says busy or locked) or other. At the end it prints one JSON
// line (see contenderSummary) on stdout and exits 0. It exits 1 if its flags are bad,
// and 2 if it is still running a minute after -duration and -op-timeout
// (a watchdog, in case its parent is gone).
func contenderMain(args []string) error {
	fs := flag.NewFlagSet("contender", flag.ContinueOnError)
	var (
		dbPath    = fs.String("db", "", "SQLite file (required)")
		id        = fs.Int("id", 0, "this process's number, for holder names and the summary")
		start     = fs.Int64("start", 0, "Unix nanoseconds at which to begin the loop (0: at once)")
		duration  = fs.Duration("duration", 2*time.Second, "how long to loop")
		workers   = fs.Int("workers", 2, "goroutines, each a holder of its own")
		leases    = fs.Int("leases", 4, "number of lease names")
		ttl       = fs.Duration("ttl", 250*time.Millisecond, "lease TTL")
		opTimeout = fs.Duration("op-timeout", 15*time.Second, "context timeout of each operation")
		busyTO    = fs.Duration("busy-timeout", sqlitelease.DefaultBusyTimeout,
			"SQLite busy_timeout (sqlitelease.WithBusyTimeout); 0 leaves all waiting to the store's own retries")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	// The benchmark prints whatever a contender writes on stderr: keep the
	// store's Info lines (one per Open) out of it, and its warnings in.
	slog.SetLogLoggerLevel(slog.LevelWarn)
	if *dbPath == "" || *workers < 1 || *leases < 1 || *duration <= 0 || *ttl <= 0 || *opTimeout <= 0 || *busyTO < 0 {
		return fmt.Errorf("-db %q -workers %d -leases %d -duration %v -ttl %v -op-timeout %v -busy-timeout %v: need -db, and positive -workers, -leases, -duration, -ttl, -op-timeout, and -busy-timeout >= 0",
			*dbPath, *workers, *leases, *duration, *ttl, *opTimeout, *busyTO)
	}
	// Never outlive the benchmark by much, whatever happens to the parent.
	time.AfterFunc(*duration+*opTimeout+time.Minute, func() {
		fmt.Fprintln(os.Stderr, "contender: watchdog: still running long after -duration")
		os.Exit(2)
	})

	c := &contender{dbPath: *dbPath, sum: contenderSummary{ID: *id}}
	c.run(*dbPath, sqlitelease.WithBusyTimeout(*busyTO), *start, *duration, *workers, *leases, *ttl, *opTimeout)
	out, err := json.Marshal(&c.sum)
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}

type contender struct {
	dbPath string // cut from error texts before they are searched for "busy"
	mu     sync.Mutex
	sum    contenderSummary
}

func (c *contender) run(dbPath string, opt sqlitelease.Option, start int64, duration time.Duration, workers, leases int, ttl, opTimeout time.Duration) {
	t0 := time.Now()
	s, err := sqlitelease.Open(dbPath, opt)
	c.record("open", time.Since(t0), err)
	if err != nil {
		return
	}
	defer func() {
		t0 := time.Now()
		err := s.Close()
		c.record("close", time.Since(t0), err)
	}()

	if d := time.Until(time.Unix(0, start)); start != 0 && d > 0 {
		time.Sleep(d)
	}
	begin := time.Now()
	if start != 0 {
		c.sum.LateNS = max(0, begin.Sub(time.Unix(0, start)).Nanoseconds())
	}
	deadline := begin.Add(duration)

	names := make([]string, leases)
	for i := range names {
		names[i] = fmt.Sprintf("contention/%d", i)
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			wk := &worker{
				c: c, s: s, names: names, ttl: ttl, opTimeout: opTimeout,
				holder:  fmt.Sprintf("contender-%d-%d-w%d", c.sum.ID, os.Getpid(), w),
				held:    make(map[string]elector.Lease),
				watches: make(map[string]watch),
			}
			for time.Now().Before(deadline) {
				wk.step()
			}
		})
	}
	wg.Wait()
	c.mu.Lock()
	c.sum.ElapsedNS = time.Since(begin).Nanoseconds()
	c.mu.Unlock()
}

// worker is one holder of a contender: it remembers the terms it holds.
type worker struct {
	c         *contender
	s         *sqlitelease.Store
	names     []string
	ttl       time.Duration
	opTimeout time.Duration
	holder    string
	held      map[string]elector.Lease
	watches   map[string]watch // leases held by others, by name
	stale     []abandoned      // oldest first
	ensured   bool             // contender_writes exists: a fenced write of this worker committed
}

// watch is what a worker saw of a lease held by another term: the lease,
// and when it first saw that Token and Version (Go's monotonic clock).
type watch struct {
	l     elector.Lease
	since time.Time
}

// observe records that the worker saw l, held by another term.
func (w *worker) observe(l elector.Lease) {
	if cur, ok := w.watches[l.Name]; ok && cur.l.Is(l) {
		return
	}
	w.watches[l.Name] = watch{l: l, since: time.Now()}
}

// observed returns the lease to pass to TryAcquire: the watched lease once
// the worker has seen it unchanged for the holder's TTL and its own, and
// the zero Lease before.
func (w *worker) observed(name string) elector.Lease {
	wt, ok := w.watches[name]
	if !ok || time.Since(wt.since) < max(wt.l.TTL, w.ttl) {
		return elector.Lease{}
	}
	return wt.l
}

// abandoned is a term its worker stopped renewing at.
type abandoned struct {
	l  elector.Lease
	at time.Time
}

// step does one operation on a random lease.
func (w *worker) step() {
	ctx, cancel := context.WithTimeout(context.Background(), w.opTimeout)
	defer cancel()
	if len(w.stale) > 0 && time.Since(w.stale[0].at) > w.ttl+100*time.Millisecond && rand.N(10) == 0 {
		w.stepStale(ctx)
		return
	}
	name := w.names[rand.N(len(w.names))]
	p := rand.N(1000)
	l, holds := w.held[name]
	t0 := time.Now()
	switch {
	case !holds && p < 200:
		cur, err := w.s.Get(ctx, name)
		if w.c.record("get", time.Since(t0), err) {
			w.observe(cur)
		}
	case !holds:
		observed := w.observed(name)
		nl, err := w.s.TryAcquire(ctx, name, w.holder, w.ttl, observed)
		var held *elector.HeldError
		if w.c.record("acquire", time.Since(t0), err) {
			w.held[name] = nl
			delete(w.watches, name)
			if observed.Token != 0 {
				w.c.mu.Lock()
				w.c.sum.TakenOver++
				w.c.mu.Unlock()
			}
		} else if errors.As(err, &held) {
			w.observe(held.Lease)
		}
	case p < 50:
		err := w.s.Release(ctx, l)
		w.c.record("release", time.Since(t0), err)
		delete(w.held, name)
	case p < 52:
		delete(w.held, name)
		w.stale = append(w.stale, abandoned{l: l, at: time.Now()})
		w.c.mu.Lock()
		w.c.sum.Abandoned++
		w.c.mu.Unlock()
	case p < 450:
		err := w.s.Fenced(leaseterm.Context(ctx, l), func(ctx context.Context, tx *sql.Tx) error { return w.write(ctx, tx, l) })
		if w.c.record("fenced", time.Since(t0), err) {
			w.ensured = true // committed, the CREATE TABLE with it
		} else if errors.Is(err, elector.ErrLeaseLost) {
			delete(w.held, name)
		}
	default:
		nl, err := w.s.Renew(ctx, l, w.ttl)
		if w.c.record("renew", time.Since(t0), err) {
			w.held[name] = nl
		} else if errors.Is(err, elector.ErrLeaseLost) {
			delete(w.held, name)
		}
	}
}

// stepStale checks the oldest abandoned term: once a later term has
// superseded it, Renew or a fenced write with it must fail with
// ErrLeaseLost. While it is still the current term, the store rightly
// honours it, and it goes back in the queue.
func (w *worker) stepStale(ctx context.Context) {
	a := w.stale[0]
	w.stale = w.stale[1:]
	t0 := time.Now()
	cur, err := w.s.Get(ctx, a.l.Name)
	switch {
	case errors.Is(err, elector.ErrNoLease): // released: a later term came and went
		w.c.record("get", time.Since(t0), err)
	case !w.c.record("get", time.Since(t0), err):
		return
	case cur.Token == a.l.Token: // not taken over yet
		w.stale = append(w.stale, a)
		return
	case cur.Token < a.l.Token:
		w.c.record("stale-get", 0, fmt.Errorf("lease %q: token %d is below the abandoned term's %d", a.l.Name, cur.Token, a.l.Token))
		return
	}
	t0 = time.Now()
	var op string
	if rand.N(2) == 0 {
		op = "stale-renew"
		_, err = w.s.Renew(ctx, a.l, w.ttl)
	} else {
		op = "stale-fenced"
		err = w.s.Fenced(leaseterm.Context(ctx, a.l), func(ctx context.Context, tx *sql.Tx) error { return w.write(ctx, tx, a.l) })
	}
	if err == nil {
		err = fmt.Errorf("lease %q token %d, abandoned %v ago with TTL %v and superseded, was still honoured", a.l.Name, a.l.Token, t0.Sub(a.at), w.ttl)
	}
	w.c.record(op, time.Since(t0), err)
}

// write is the fenced write: one row into the contender's own table, which
// the first write of each worker creates if needed (inside the fenced
// transaction, so under the store's busy handling).
func (w *worker) write(ctx context.Context, tx *sql.Tx, l elector.Lease) error {
	if !w.ensured {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS contender_writes (
	id INTEGER PRIMARY KEY, lease TEXT NOT NULL, holder TEXT NOT NULL, token INTEGER NOT NULL, at INTEGER NOT NULL)`); err != nil {
			return fmt.Errorf("create contender_writes: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO contender_writes (lease, holder, token, at) VALUES (?, ?, ?, ?)`,
		l.Name, l.Holder, int64(l.Token), time.Now().UnixNano()); err != nil {
		return fmt.Errorf("insert into contender_writes: %w", err)
	}
	return nil
}

// record counts one operation and classifies its error. It returns whether
// the operation succeeded.
func (c *contender) record(op string, took time.Duration, err error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sum.Ops++
	c.sum.MaxOpNS = max(c.sum.MaxOpNS, took.Nanoseconds())
	switch {
	case err == nil:
		switch op {
		case "acquire":
			c.sum.Acquired++
		case "renew":
			c.sum.Renewed++
		case "release":
			c.sum.Released++
		case "get":
			c.sum.Got++
		case "fenced":
			c.sum.Written++
		}
		return true
	case isBusy(err, c.dbPath):
		c.sum.Busy++
		if len(c.sum.BusyEx) < maxExamples {
			c.sum.BusyEx = append(c.sum.BusyEx, fmt.Sprintf("%s after %v: %v", op, took, err))
		}
	case errors.Is(err, elector.ErrHeld) && op == "acquire":
		c.sum.Held++
	case errors.Is(err, elector.ErrLeaseLost) && (op == "renew" || op == "fenced"):
		c.sum.Lost++
	case errors.Is(err, elector.ErrLeaseLost) && (op == "stale-renew" || op == "stale-fenced"):
		c.sum.StaleLost++
	case errors.Is(err, elector.ErrNoLease) && op == "get":
		c.sum.NoLease++
	default:
		c.sum.Other++
		if len(c.sum.OtherEx) < maxExamples {
			c.sum.OtherEx = append(c.sum.OtherEx, fmt.Sprintf("%s after %v: %v", op, took, err))
		}
	}
	return false
}

// isBusy reports whether err shows a busy or locked database: by its SQLite
// code anywhere in the chain, or by its text without the file's path (which
// may contain "busy" itself, as a benchmark's temporary directory does).
func isBusy(err error, dbPath string) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return true
		}
	}
	msg := strings.ToLower(strings.ReplaceAll(err.Error(), dbPath, "<db>"))
	for _, s := range []string{"sqlite_busy", "sqlite_locked", "database is locked", "table is locked", "busy"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
