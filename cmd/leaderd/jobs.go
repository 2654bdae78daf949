package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/jobs/airdropexpiry"
	"github.com/leaderaware/leaderaware/jobs/pricerefresh"
	"github.com/leaderaware/leaderaware/jobs/webhookretry"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// newPriceJob returns the price refresh job, on the HTTP source at
// o.priceURL or, without one, on simulated prices. Each fetch is logged.
func newPriceJob(s *sqlitelease.Store, o options, log *slog.Logger) (priceJob, error) {
	var src pricerefresh.PriceSource = pricerefresh.NewSimulatedSource(uint64(time.Now().UnixNano()), nil)
	if o.priceURL != "" {
		h, err := pricerefresh.NewHTTPSource(o.priceURL, 0)
		if err != nil {
			return nil, err
		}
		src = h
	}
	j, err := pricerefresh.New(context.Background(), s, loggedSource{src, log}, pricerefresh.Config{
		Interval: o.interval,
		OnError:  onError(log, priceLease),
	})
	if err != nil {
		return nil, err
	}
	return j, nil
}

// loggedSource logs every fetch of its PriceSource, with the fencing token
// of the term that fetched.
type loggedSource struct {
	pricerefresh.PriceSource
	log *slog.Logger
}

func (s loggedSource) Prices(ctx context.Context) ([]pricerefresh.Price, error) {
	prices, err := s.PriceSource.Prices(ctx)
	if err != nil {
		return nil, err
	}
	attrs := []any{"job", priceLease}
	if l, ok := elector.LeaseFromContext(ctx); ok {
		attrs = append(attrs, "holder", l.Holder, "token", l.Token)
	}
	for _, p := range prices {
		attrs = append(attrs, p.Symbol, p.Value)
	}
	s.log.InfoContext(ctx, "prices fetched", attrs...)
	return prices, nil
}

// newOutbox returns the webhook outbox, which any instance may enqueue to.
func newOutbox(s *sqlitelease.Store, o options, log *slog.Logger) (*webhookretry.Outbox, error) {
	return webhookretry.New(context.Background(), s, webhookretry.Config{
		Secret:   []byte(o.secret),
		Interval: o.interval,
		OnError:  onError(log, webhookLease),
	})
}

// newWebhookJob returns the outbox's worker, the job that sends.
func newWebhookJob(ob *webhookretry.Outbox) webhookJob { return ob.Worker() }

// newAirdrops returns the airdrop expiry job as *airdropexpiry.Job, whose
// Create the demo uses.
func newAirdrops(s *sqlitelease.Store, o options, log *slog.Logger) (*airdropexpiry.Job, error) {
	return airdropexpiry.New(context.Background(), s, airdropexpiry.Config{
		Interval: o.interval,
		OnError:  onError(log, airdropLease),
	})
}

// newAirdropJob returns the same job as airdropJob, the type LeaderJob
// decorates.
func newAirdropJob(j *airdropexpiry.Job) airdropJob { return j }
