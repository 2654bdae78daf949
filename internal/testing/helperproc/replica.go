package helperproc

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

// LeaseName is the lease that the replicas campaign for.
const LeaseName = "job"

// replicaMain is the mode replica: one Replica on the store of the flags
// (see storeFlags), without fenced writes.
func replicaMain(args []string) error {
	fs := flag.NewFlagSet("replica", flag.ContinueOnError)
	sf := addStoreFlags(fs)
	r := ReplicaFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	s, err := sf.open(nil)
	if err != nil {
		return err
	}
	defer s.close()
	return r.Run(s.store, nil)
}

// Replica is one replica process of an application, the mode replica of
// replicatest's Failover and Chaos: a decorated job on an
// elector.LeaseElector. While it leads, its job makes a fenced write every
// -every (if set). It prints, one line each, after the wall clock in Unix
// nanoseconds:
//
//	START <holder> <token>     the inner job started: this replica leads
//	WROTE <holder> <token> <n> fenced write number n committed
//	REFUSED <holder> <token>   the store refused a fenced write: the term is over
//	STOP <holder> <token>      the inner job stopped (its writes have returned)
//	ERROR <holder> <message>   an error the decorator reported, or a write's
//	EXIT <holder>              stopped gracefully after SIGTERM
type Replica struct {
	holder            string
	ttl, renew, retry time.Duration
	every             time.Duration
	leases            int    // the placed mode (see runPlaced) if > 0
	group             string // its group and lease prefix
	balance           bool   // its leases in a placement.Group
}

// ReplicaFlags defines in fs the flags that replicatest gives its
// replicas, besides the store's own, and returns the Replica they set: a
// module whose store the built-in replica mode cannot open runs a mode
// replica of its own (see Main) with them.
func ReplicaFlags(fs *flag.FlagSet) *Replica {
	r := &Replica{}
	fs.StringVar(&r.holder, "holder", "", "holder name")
	fs.DurationVar(&r.ttl, "ttl", 1500*time.Millisecond, "lease TTL")
	fs.DurationVar(&r.renew, "renew", 500*time.Millisecond, "renew interval")
	fs.DurationVar(&r.retry, "retry", 500*time.Millisecond, "retry interval")
	fs.DurationVar(&r.every, "every", 0, "period of the fenced writes (0: none)")
	fs.IntVar(&r.leases, "leases", 0, "run this many leases, the placed mode (0: the one lease of Failover and Chaos)")
	fs.StringVar(&r.group, "group", "placed", "the placed mode's group, and its leases' prefix")
	fs.BoolVar(&r.balance, "balance", false, "the placed mode's leases in a placement.Group (else first come, first wins)")
	return r
}

// WriteFunc makes fenced write number n of the term in ctx, whose lease is
// l, recording l.Token, l.Holder, n and the time, which Chaos reads back as
// replicatest.Write.
type WriteFunc func(ctx context.Context, l elector.Lease, n int64) error

// Run runs the replica on store until SIGTERM, then stops its job
// gracefully. With -leases it runs the placed mode instead (see
// runPlaced), which makes no writes.
func (r *Replica) Run(store elector.Store, write WriteFunc) error {
	if r.leases > 0 {
		return r.runPlaced(store)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	defer signal.Stop(sig)
	e, err := elector.New(store, LeaseName, elector.Config{TTL: r.ttl, RenewInterval: r.renew, RetryInterval: r.retry, Holder: r.holder})
	if err != nil {
		return err
	}
	out := &lineWriter{w: os.Stdout, stamped: true}
	job := &replicaJob{out: out, holder: r.holder, every: r.every, write: write}
	leader := decorator.Decorate[decorator.Job](job, e,
		decorator.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		decorator.WithHooks(decorator.Hooks{
			OnError: func(_ context.Context, err error) { out.printf("ERROR %s %s", r.holder, oneLine(err)) },
		}))
	if err := leader.Start(context.Background()); err != nil {
		return err
	}
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = leader.Stop(ctx)
	out.printf("EXIT %s", r.holder)
	return err
}

// replicaJob is the inner job: it prints START and STOP and, between them,
// makes a fenced write every period.
type replicaJob struct {
	out    *lineWriter
	holder string
	every  time.Duration
	write  WriteFunc
	n      atomic.Int64 // writes so far, across terms

	// Set by Start, read by Stop: the decorator calls them in turn.
	token  uint64
	cancel context.CancelFunc
	done   chan struct{}
}

func (j *replicaJob) Start(ctx context.Context) error {
	t, ok := elector.TermFromContext(ctx)
	if !ok {
		return errors.New("the start context carries no term")
	}
	j.token = t.Token()
	j.out.printf("START %s %d", j.holder, j.token)
	if j.every > 0 {
		// The writes outlive Start: keep ctx's values (the term), not its end.
		wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		j.cancel, j.done = cancel, make(chan struct{})
		go j.writeLoop(wctx, t)
	}
	return nil
}

func (j *replicaJob) writeLoop(ctx context.Context, t elector.Term) {
	defer close(j.done)
	tick := time.NewTicker(j.every)
	defer tick.Stop()
	for {
		n := j.n.Add(1)
		switch err := j.write(ctx, t.Lease(), n); {
		case err == nil:
			j.out.printf("WROTE %s %d %d", j.holder, j.token, n)
		case errors.Is(err, elector.ErrLeaseLost) || errors.Is(err, elector.ErrLeaseExpired):
			j.out.printf("REFUSED %s %d", j.holder, j.token)
		case ctx.Err() == nil:
			j.out.printf("ERROR %s write %d: %s", j.holder, n, oneLine(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (j *replicaJob) Stop(context.Context) error {
	if j.cancel != nil {
		j.cancel()
		<-j.done
		j.cancel = nil
	}
	j.out.printf("STOP %s %d", j.holder, j.token)
	return nil
}
