package helperproc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/placement"
)

// balance is the chaos lease's company with -leases N > 1: one
// placement.Group, named after the chaos lease, balances it and N-1 more
// leases, <name>-1 to <name>-(N-1), whose inner jobs write nothing and
// print, one line each (times in Unix nanoseconds):
//
//	XRUN <holder> <token> <lease> <t> <inode> the inner job's Start is called at t, on the SQLite file with inode (0 on PostgreSQL)
//	XHALT <holder> <token> <lease> <t1> <t2>  the inner job's Stop was called at t1 and returned at t2
//
// and every lease's term that ends because the group asked (a handoff, to
// balance the group or to drain this process) prints
//
//	YIELD <holder> <token> <lease>
//
// With -leases 1 (the default) there is no group: the chaos lease is
// first come, first served, as before.
type balance struct {
	group  *placement.Group // nil without -leases
	extras []decorator.Job
	out    *lineWriter
	holder string
}

// newBalance returns the elector of the chaos lease name, in a group with
// leases-1 more when leases > 1.
func newBalance(store elector.Store, name string, leases int, cfg elector.Config, out *lineWriter, logger *slog.Logger,
	fail func(context.Context, error), inode func() uint64) (*elector.LeaseElector, *balance, error) {
	b := &balance{out: out, holder: cfg.Holder}
	if leases <= 1 {
		e, err := elector.New(store, name, cfg)
		return e, b, err
	}
	g, err := placement.New(store, placement.Config{Name: name, Holder: cfg.Holder, TTL: cfg.TTL, RetryInterval: cfg.RetryInterval, Logger: logger})
	if err != nil {
		return nil, nil, err
	}
	b.group = g
	for i := 1; i < leases; i++ {
		lease := fmt.Sprintf("%s-%d", name, i)
		e, err := g.Elector(lease, cfg)
		if err != nil {
			return nil, nil, err
		}
		b.extras = append(b.extras, decorator.Decorate[decorator.Job](&leaseJob{out: out, holder: cfg.Holder, lease: lease, inode: inode}, e,
			decorator.WithLogger(logger), decorator.WithHooks(decorator.Hooks{
				OnDemoted: func(_ context.Context, t elector.Term, _ error) { b.demoted(t, lease) },
				OnError:   fail,
			})))
	}
	e, err := g.Elector(name, cfg)
	return e, b, err
}

// start joins the group and starts the other leases' jobs.
func (b *balance) start() error {
	if b.group == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.group.Start(ctx); err != nil {
		return err
	}
	for _, j := range b.extras {
		if err := j.Start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// drain gives the group's leases to the other processes, as a graceful
// shutdown does before it stops the jobs.
func (b *balance) drain(ctx context.Context) error {
	if b.group == nil {
		return nil
	}
	return b.group.Drain(ctx)
}

// stop stops the other leases' jobs and leaves the group.
func (b *balance) stop(ctx context.Context) error {
	if b.group == nil {
		return nil
	}
	errs := make([]error, len(b.extras))
	var wg sync.WaitGroup
	for i, j := range b.extras {
		wg.Go(func() { errs[i] = j.Stop(ctx) })
	}
	wg.Wait()
	return errors.Join(append(errs, b.group.Close(ctx))...)
}

// demoted prints YIELD if the group asked the term of lease to end.
func (b *balance) demoted(t elector.Term, lease string) {
	y, ok := t.(elector.Yielder)
	if !ok || y.Yield() == nil {
		return
	}
	select {
	case <-y.Yield():
		b.out.printf("YIELD %s %d %s", b.holder, t.Token(), lease)
	default:
	}
}
