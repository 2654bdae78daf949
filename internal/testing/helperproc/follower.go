package helperproc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/pglease"
)

// resignTimeout bounds the Resign of each held term at shutdown.
const resignTimeout = 10 * time.Second

// followerStatus is the line the process prints for each line it reads. Counts
// are totals since the start.
type followerStatus struct {
	Held    int64 `json:"held"`    // terms running now
	Waiting int64 `json:"waiting"` // electors whose last campaign attempt found the lease held
	Calls   int64 `json:"calls"`   // store calls the electors and terms made (TryAcquire, Renew, Release, Get)
	Renews  int64 `json:"renews"`  // of which Renew
	// RenewsFailed counts the Renew calls that failed; the term retries
	// them sooner, and ends only if they fail until its trust window closes.
	RenewsFailed int64 `json:"renews_failed"`
	Lost         int64 `json:"lost"`   // terms that ended other than by the shutdown's Resign
	Errors       int64 `json:"errors"` // Campaign calls that returned a store error
	// LastErr is the text of the last error counted in Lost or Errors.
	LastErr string `json:"last_err,omitempty"`
}

// followerReplica is the process's state, shared by its electors.
type followerReplica struct {
	held, waiting, calls, renews, renewsFailed, lost, errors atomic.Int64

	mu      sync.Mutex
	lastErr string
}

// followerMain is the mode follower, one replica of BenchmarkFollowers
// (bench/followers_test.go): it opens a lease store and runs -leases
// LeaseElectors on it (lease-0000, lease-0001, …), one goroutine each, all
// with the default elector timings and one holder name (-holder). Each
// campaigns, holds the term it wins until it ends or the process is told to
// stop, and campaigns again; so the replica leads the leases it wins and
// waits, as a follower, on the others.
//
// The store is the SQLite file -db or the PostgreSQL database -pg (the
// lease table in -schema, connections named -app in pg_stat_activity).
// With -poll the store is wrapped so that the electors see only
// elector.Store: its optional interfaces are hidden, and the elector's watch
// reads each lease with its own Get every jittered RetryInterval.
//
// Each line the process reads on stdin asks for its status, which it
// answers with one JSON line on stdout (see followerStatus). SIGTERM, or the end of
// stdin (the benchmark is gone), stops it: campaigns end, held terms are
// resigned, the store is closed, and it exits 0, or 1 if a resign or Close
// failed. -cpuprofile writes a CPU profile of the whole run.
func followerMain(args []string) error {
	fs := flag.NewFlagSet("follower", flag.ContinueOnError)
	sf := addStoreFlags(fs)
	var (
		app     = fs.String("app", pglease.DefaultApplicationName, "application_name of the store's connections (-pg)")
		leases  = fs.Int("leases", 1000, "number of leases, each with its own elector")
		holder  = fs.String("holder", "", "holder name of every elector (default: the elector's default)")
		poll    = fs.Bool("poll", false, "hide the store's optional interfaces (BulkReader, Notifier, BatchRenewer)")
		profile = fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	slog.SetDefault(slog.New(slog.DiscardHandler))
	if *leases < 1 {
		return fmt.Errorf("-leases %d: want at least 1", *leases)
	}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return errors.Join(err, f.Close())
		}
		defer func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				fmt.Fprintln(os.Stderr, "follower:", err)
			}
		}()
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)

	s, err := sf.open(nil, pglease.WithApplicationName(*app))
	if err != nil {
		return err
	}
	store, closeFn := s.store, s.close
	if *poll {
		store = pollOnly{store}
	}

	r := &followerReplica{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var resignErrs atomic.Int64
	for i := range *leases {
		o := &followerObserver{r: r}
		e, err := elector.New(store, fmt.Sprintf("lease-%04d", i), elector.Config{Holder: *holder, Observer: o})
		if err != nil {
			cancel()
			wg.Wait()
			return errors.Join(err, closeFn())
		}
		wg.Go(func() {
			if err := r.campaign(ctx, e); err != nil {
				resignErrs.Add(1)
				fmt.Fprintln(os.Stderr, "follower:", err)
			}
		})
	}

	eof := make(chan struct{})
	go followerAnswer(r, eof) // ends with stdin, or with the process
	select {
	case <-sigs:
	case <-eof:
	}
	cancel()
	wg.Wait()
	err = closeFn()
	if n := resignErrs.Load(); n > 0 {
		err = errors.Join(err, fmt.Errorf("%d terms failed to resign", n))
	}
	return err
}

// campaign campaigns for e's lease until ctx ends, holding each term won
// until it ends; at the end it resigns the term it holds, if any, and
// returns the Resign's error.
func (r *followerReplica) campaign(ctx context.Context, e *elector.LeaseElector) error {
	retry := e.Config().RetryInterval
	for {
		t, err := e.Campaign(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.errors.Add(1)
			r.setErr(err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(retry):
			}
			continue
		}
		r.held.Add(1)
		select {
		case <-t.Done():
			r.held.Add(-1)
			r.lost.Add(1)
			r.setErr(fmt.Errorf("term of %s ended: %w", e.Name(), t.Err()))
			t.Abandon() // every term is resigned or abandoned, even one that ended
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.Background(), resignTimeout)
			err := t.Resign(rctx)
			cancel()
			r.held.Add(-1)
			return err
		}
	}
}

func (r *followerReplica) setErr(err error) {
	r.mu.Lock()
	r.lastErr = err.Error()
	r.mu.Unlock()
}

// followerAnswer prints the status for every line read from stdin, and closes eof
// when stdin ends.
func followerAnswer(r *followerReplica, eof chan<- struct{}) {
	defer close(eof)
	in := bufio.NewScanner(os.Stdin)
	enc := json.NewEncoder(os.Stdout)
	for in.Scan() {
		r.mu.Lock()
		st := followerStatus{
			Held: r.held.Load(), Waiting: r.waiting.Load(), Calls: r.calls.Load(), Renews: r.renews.Load(), RenewsFailed: r.renewsFailed.Load(),
			Lost: r.lost.Load(), Errors: r.errors.Load(), LastErr: r.lastErr,
		}
		r.mu.Unlock()
		if enc.Encode(st) != nil {
			return
		}
	}
}

// followerObserver counts one elector's store calls and tracks whether it waits.
type followerObserver struct {
	r       *followerReplica
	waiting atomic.Bool
}

func (o *followerObserver) Observe(ev elector.Event) {
	switch ev.Kind {
	case elector.EventStoreOp:
		o.r.calls.Add(1)
		if ev.Op == elector.OpRenew {
			o.r.renews.Add(1)
			if ev.Result != elector.ResultOK {
				o.r.renewsFailed.Add(1)
			}
		}
	case elector.EventCampaign:
		held := ev.Result == elector.ResultHeld
		if o.waiting.Swap(held) != held {
			if held {
				o.r.waiting.Add(1)
			} else {
				o.r.waiting.Add(-1)
			}
		}
	}
}

// pollOnly shows the electors only the elector.Store methods of a store,
// hiding its optional interfaces (BulkReader, Notifier, BatchRenewer).
type pollOnly struct{ elector.Store }
