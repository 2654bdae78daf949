package main

import (
	"context"
	"log/slog"

	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/fxmodule"
	"github.com/leaderaware/leaderaware/jobs"
)

// tickMessage is the message of the line each pass of a tick logs.
const tickMessage = "fenced pass"

// The demo's jobs on etcd and MySQL, whose databases the reference jobs'
// SQL does not speak: one tick per lease, each a type of its own, since
// fxmodule.LeaderJob runs one job per type.
type (
	priceTick   struct{ *jobs.EveryJob }
	webhookTick struct{ *jobs.EveryJob }
	airdropTick struct{ *jobs.EveryJob }
)

// tickJobs provides and runs the three ticks, each under its lease, with
// fenced as the check of every pass (see [fence]).
func tickJobs(o options, fenced func(context.Context) error, log *slog.Logger) fx.Option {
	tick := func(lease string) *jobs.EveryJob { return newTick(lease, fenced, o, log) }
	return fx.Options(
		fx.Provide(
			func() *priceTick { return &priceTick{tick(priceLease)} },
			func() *webhookTick { return &webhookTick{tick(webhookLease)} },
			func() *airdropTick { return &airdropTick{tick(airdropLease)} },
		),
		fxmodule.LeaderJob[*priceTick](priceLease, jobOptions(priceLease, o.holder, log)...),
		fxmodule.LeaderJob[*webhookTick](webhookLease, jobOptions(webhookLease, o.holder, log)...),
		fxmodule.LeaderJob[*airdropTick](airdropLease, jobOptions(airdropLease, o.holder, log)...),
	)
}

// newTick returns a job that, every o.interval, checks its term with
// fenced and logs the pass with the term's token. A pass whose term is
// over fails, and is logged as a failed pass.
func newTick(lease string, fenced func(context.Context) error, o options, log *slog.Logger) *jobs.EveryJob {
	return jobs.Every(o.interval, func(ctx context.Context) error {
		if err := fenced(ctx); err != nil {
			return err
		}
		logPass(ctx, log, lease, tickMessage)
		return nil
	}, jobs.WithName(lease), jobs.WithErrorHandler(onError(log, lease)))
}
