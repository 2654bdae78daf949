package main

import (
	"context"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/airdropexpiry"
	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/jobdb"
	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/pricerefresh"
	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/webhookretry"
	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/fxmodule"
	"github.com/leaderaware/leaderaware/pglease"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// The lease names of the three jobs.
const (
	priceLease   = "price-refresh"
	webhookLease = "webhook-retry"
	airdropLease = "airdrop-expiry"
)

// leases are the lease names of the jobs, in the order status lists them.
var leases = []string{airdropLease, priceLease, webhookLease}

// newApp returns the daemon's fx app: the lease store, the three jobs,
// each leader-aware under its own lease, and, with o.http, the HTTP server
// (see [webOptions]). On o.db or o.pg, the store is the one fxmodule.Module
// opens, and the jobs are the reference jobs, with their tables in the same
// database, and the demo feeders (a few airdrops at start, a webhook every
// interval if o.webhookURL is set). On etcd and MySQL, the store is store,
// which the caller opened and closes, and the jobs are ticks (see
// [tickJobs]). log receives one line per leadership transition and one per
// pass of a job; fx's own events, errors too, go to it at Debug. extra
// options are appended (tests).
func newApp(o options, store elector.Store, log *slog.Logger, extra ...fx.Option) *fx.App {
	var module fxmodule.Config
	var work fx.Option
	switch o.store() {
	case storeSQLite:
		module = fxmodule.Config{Store: fxmodule.SQLite(o.db)}
		work = referenceJobs(o, log, fx.Provide(sqliteFenced))
	case storePostgres:
		module = fxmodule.Config{Store: fxmodule.Postgres(o.pg, pgOptions(o.pg)...)}
		work = referenceJobs(o, log, fx.Provide(postgresFenced))
	default:
		work = fx.Options(fxmodule.WithStore(store), tickJobs(o, fence(store), log))
	}
	module.Elector, module.NoBalance = o.electorConfig(), o.noBalance
	opts := []fx.Option{
		fx.WithLogger(func() fxevent.Logger {
			// fx's own events, errors too, at Debug: an error that stops the
			// app comes back from fx.New or Start, and serve logs its cause
			// in one line.
			l := &fxevent.SlogLogger{Logger: log}
			l.UseLogLevel(slog.LevelDebug)
			l.UseErrorLevel(slog.LevelDebug)
			return l
		}),
		fxmodule.Module(module),
		fx.Supply(o, log),
	}
	if o.http != "" {
		// Before the jobs: the server listens before they start (a busy
		// address fails the start before any job ran), and shuts down after
		// they stopped.
		opts = append(opts, webOptions())
	}
	opts = append(opts, work)
	return fx.New(append(opts, extra...)...)
}

// referenceJobs provides and runs the reference jobs on the
// jobdb.FencedStore that fenced provides, and the demo feeders.
func referenceJobs(o options, log *slog.Logger, fenced fx.Option) fx.Option {
	return fx.Options(
		fenced,
		fx.Provide(newPriceJob, newOutbox, newWebhookJob, newAirdrops),
		// The jobs' concrete types: the graph keeps the plain jobs (the demo
		// creates airdrops with the one it gets), and each LeaderJob runs its
		// own decorated one.
		fxmodule.LeaderJob[*pricerefresh.Job](priceLease, jobOptions(priceLease, o.holder, log)...),
		fxmodule.LeaderJob[*webhookretry.Worker](webhookLease, jobOptions(webhookLease, o.holder, log)...),
		fxmodule.LeaderJob[*airdropexpiry.Job](airdropLease, jobOptions(airdropLease, o.holder, log)...),
		fx.Invoke(seedAirdrops, enqueueWebhooks),
	)
}

// jobOptions are the decorator options of the job under lease: the
// decorator logs its transitions, one line each (elections and
// resignations at Info, other demotions at Warn, with the lease, holder
// and token), and its errors at Warn.
func jobOptions(lease, holder string, base *slog.Logger) []decorator.Option {
	log := base.With("job", lease, "holder", holder)
	return []decorator.Option{
		decorator.WithLogger(base),
		decorator.WithHooks(decorator.Hooks{
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

// logPass logs one Info line for a pass of the job under lease: msg and
// attrs, with the holder and fencing token of the term that ran it.
func logPass(ctx context.Context, log *slog.Logger, lease, msg string, attrs ...any) {
	head := []any{"job", lease}
	if l, ok := elector.LeaseFromContext(ctx); ok {
		head = append(head, "holder", l.Holder, "token", l.Token)
	}
	log.InfoContext(ctx, msg, append(head, attrs...)...)
}

// sqliteFenced gives the jobs the SQLite store's database.
func sqliteFenced(s *sqlitelease.Store) jobdb.FencedStore { return s }

// postgresFenced gives the jobs the PostgreSQL store's database, through
// database/sql, closed when the app stops (before the store).
func postgresFenced(lc fx.Lifecycle, s *pglease.Store) jobdb.FencedStore {
	q := jobdb.NewPostgres(s)
	lc.Append(fx.StopHook(q.Close))
	return q
}

// pgOptions returns the pglease options for dsn: the lease table goes in
// the first schema of the DSN's search_path, where the jobs' tables go
// too, or in pglease's default schema if the DSN sets none. A DSN that
// does not parse gets none: pglease.Open says what is wrong with it.
func pgOptions(dsn string) []pglease.Option {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil
	}
	schema, _, _ := strings.Cut(cfg.RuntimeParams["search_path"], ",")
	schema = strings.Trim(strings.TrimSpace(schema), `"`)
	if schema == "" || strings.HasPrefix(schema, "$") {
		return nil
	}
	return []pglease.Option{pglease.WithSchema(schema)}
}
