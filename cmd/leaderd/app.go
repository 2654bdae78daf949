package main

import (
	"context"
	"log/slog"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/fxmodule"
)

// The lease names of the three jobs.
const (
	priceLease   = "price-refresh"
	webhookLease = "webhook-retry"
	airdropLease = "airdrop-expiry"
)

// leases are the lease names of the jobs, in the order status lists them.
var leases = []string{airdropLease, priceLease, webhookLease}

// The jobs' types in the graph: one interface type per job, so that
// fxmodule.LeaderJob decorates each one on its own.
type (
	priceJob   decorator.Job // *pricerefresh.Job
	webhookJob decorator.Job // *webhookretry.Worker
	airdropJob decorator.Job // *airdropexpiry.Job
)

// newApp returns the daemon's fx app: the lease store on o.db, the three
// jobs, each leader-aware under its own lease, and the demo feeders (a few
// airdrops at start, a webhook every interval if o.webhookURL is set). log
// receives one line per leadership transition and one per price fetch;
// fx's own events go to it at Debug. extra options are appended (tests).
func newApp(o options, log *slog.Logger, extra ...fx.Option) *fx.App {
	opts := []fx.Option{
		fx.WithLogger(func() fxevent.Logger {
			l := &fxevent.SlogLogger{Logger: log}
			l.UseLogLevel(slog.LevelDebug)
			return l
		}),
		fxmodule.Module(fxmodule.Config{SQLitePath: o.db, Elector: o.electorConfig()}),
		fx.Supply(o, log),
		fx.Provide(newPriceJob, newOutbox, newWebhookJob, newAirdrops, newAirdropJob),
		fxmodule.LeaderJob[priceJob](priceLease, jobOptions(priceLease, o.holder, log)...),
		fxmodule.LeaderJob[webhookJob](webhookLease, jobOptions(webhookLease, o.holder, log)...),
		fxmodule.LeaderJob[airdropJob](airdropLease, jobOptions(airdropLease, o.holder, log)...),
		fx.Invoke(seedAirdrops, enqueueWebhooks),
	}
	return fx.New(append(opts, extra...)...)
}

// jobOptions are the decorator options of the job under lease: its
// transitions logged at Info, one line each, and its errors at Warn.
func jobOptions(lease, holder string, base *slog.Logger) []decorator.Option {
	log := base.With("job", lease, "holder", holder)
	return []decorator.Option{
		decorator.WithLogger(base), // its Debug lines name the job and lease themselves
		decorator.WithHooks(decorator.Hooks{
			OnElected: func(ctx context.Context, t elector.Term) {
				log.InfoContext(ctx, "elected", "token", t.Token())
			},
			OnDemoted: func(ctx context.Context, t elector.Term, cause error) {
				log.InfoContext(ctx, "demoted", "token", t.Token(), "cause", cause)
			},
			OnError: func(ctx context.Context, err error) {
				log.WarnContext(ctx, "job error", "err", err)
			},
		}),
	}
}

// onError returns a job's error handler: a Warn line naming the job.
func onError(log *slog.Logger, lease string) func(context.Context, error) {
	return func(ctx context.Context, err error) {
		log.WarnContext(ctx, "job pass failed", "job", lease, "err", err)
	}
}
