package helperproc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/placement"
)

// The placed mode of a Replica (-leases L, see ReplicaFlags) runs L
// decorated jobs, on the leases placedLease(-group, 0..L-1), in one
// placement.Group named -group if -balance is set, else each on a plain
// elector (first come, first wins). Its inner jobs make no writes; it
// prints, one line each, after the wall clock in Unix nanoseconds:
//
//	START <holder> <token> <lease>  the inner job of lease started
//	STOP <holder> <token> <lease>   the inner job of lease stopped
//	DRAINED <holder>                SIGUSR1's Drain returned: it holds no lease
//	RESUMED <holder>                SIGUSR2 ended the drain
//	ERROR <holder> <message>        an error the decorator, the group or a drain reported
//	EXIT <holder>                   stopped gracefully after SIGTERM
//
// SIGTERM drains the group first (with -balance), then stops the jobs and
// leaves the group, as a graceful shutdown does.

// placedLease returns the name of lease i of the placed replicas of group.
func placedLease(group string, i int) string { return fmt.Sprintf("%s-%02d", group, i) }

// runPlaced runs the placed mode on store until SIGTERM.
func (r *Replica) runPlaced(store elector.Store) error {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sig)
	out := &lineWriter{w: os.Stdout, stamped: true}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	report := func(_ context.Context, err error) { out.printf("ERROR %s %s", r.holder, oneLine(err)) }
	cfg := elector.Config{TTL: r.ttl, RenewInterval: r.renew, RetryInterval: r.retry, Holder: r.holder}

	var g *placement.Group
	newElector := func(name string) (*elector.LeaseElector, error) { return elector.New(store, name, cfg) }
	if r.balance {
		var err error
		g, err = placement.New(store, placement.Config{Name: r.group, Holder: r.holder, TTL: r.ttl, RetryInterval: r.retry, Logger: logger})
		if err != nil {
			return err
		}
		newElector = func(name string) (*elector.LeaseElector, error) { return g.Elector(name, cfg) }
	}
	leaders := make([]decorator.Job, r.leases)
	for i := range leaders {
		name := placedLease(r.group, i)
		e, err := newElector(name)
		if err != nil {
			return err
		}
		leaders[i] = decorator.Decorate[decorator.Job](&leaseJob{out: out, holder: r.holder, lease: name}, e,
			decorator.WithLogger(logger), decorator.WithHooks(decorator.Hooks{OnError: report}))
	}
	bounded := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 10*time.Second)
	}
	if g != nil {
		ctx, cancel := bounded()
		err := g.Start(ctx)
		cancel()
		if err != nil {
			return err
		}
	}
	for _, l := range leaders {
		if err := l.Start(context.Background()); err != nil {
			return err
		}
	}
	for s := range sig {
		switch {
		case s == syscall.SIGUSR1 && g != nil:
			ctx, cancel := bounded()
			if err := g.Drain(ctx); err != nil {
				report(ctx, fmt.Errorf("drain: %w", err))
			} else {
				out.printf("DRAINED %s", r.holder)
			}
			cancel()
		case s == syscall.SIGUSR2 && g != nil:
			g.Resume()
			out.printf("RESUMED %s", r.holder)
		case s == syscall.SIGTERM:
			ctx, cancel := bounded()
			defer cancel()
			if g != nil {
				if err := g.Drain(ctx); err != nil {
					report(ctx, fmt.Errorf("drain before the stop: %w", err))
				}
			}
			errs := make([]error, len(leaders))
			var wg sync.WaitGroup
			for i, l := range leaders {
				wg.Go(func() { errs[i] = l.Stop(ctx) })
			}
			wg.Wait()
			if g != nil {
				errs = append(errs, g.Close(ctx))
			}
			out.printf("EXIT %s", r.holder)
			return errors.Join(errs...)
		default:
			report(context.Background(), fmt.Errorf("%v without -balance: nothing to drain or resume", s))
		}
	}
	return nil
}

// leaseJob is the inner job of one lease of the placed mode, which prints
// START and STOP, or of one of the chaos mode's other leases (inode set),
// which prints XRUN and XHALT (see balance).
type leaseJob struct {
	out           *lineWriter
	holder, lease string
	inode         func() uint64 // chaos mode: the inode of the store's file now
	token         uint64        // set by Start, read by Stop: the decorator calls them in turn
}

func (j *leaseJob) Start(ctx context.Context) error {
	t, ok := elector.TermFromContext(ctx)
	if !ok {
		return errors.New("the start context carries no term")
	}
	j.token = t.Token()
	if j.inode == nil {
		j.out.printf("START %s %d %s", j.holder, j.token, j.lease)
		return nil
	}
	// The store follows its path to a restored file: name the file of the
	// term, as the chaos lease's OPEN line does.
	j.out.printf("XRUN %s %d %s %d %d", j.holder, j.token, j.lease, time.Now().UnixNano(), j.inode())
	return nil
}

func (j *leaseJob) Stop(context.Context) error {
	if j.inode == nil {
		j.out.printf("STOP %s %d %s", j.holder, j.token, j.lease)
		return nil
	}
	called := time.Now()
	j.out.printf("XHALT %s %d %s %d %d", j.holder, j.token, j.lease, called.UnixNano(), time.Now().UnixNano())
	return nil
}
