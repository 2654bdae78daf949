package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/airdropexpiry"
	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/jobdb"
	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/pricerefresh"
	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/webhookretry"
)

// newPriceJob returns the price refresh job, on the HTTP source at
// o.priceURL or, without one, on simulated prices. Each refresh is logged
// with the prices it stored.
func newPriceJob(s jobdb.FencedStore, o options, log *slog.Logger) (*pricerefresh.Job, error) {
	var src pricerefresh.PriceSource = pricerefresh.NewSimulatedSource(uint64(time.Now().UnixNano()), nil)
	if o.priceURL != "" {
		h, err := pricerefresh.NewHTTPSource(o.priceURL, 0)
		if err != nil {
			return nil, err
		}
		src = h
	}
	return pricerefresh.New(context.Background(), s, src, pricerefresh.Config{
		Interval: o.interval,
		OnError:  onError(log, priceLease),
		OnPass: func(ctx context.Context, prices []pricerefresh.Price) {
			var attrs []any
			for _, p := range prices {
				attrs = append(attrs, p.Symbol, p.Value)
			}
			logPass(ctx, log, priceLease, "prices refreshed", attrs...)
		},
	})
}

// newOutbox returns the webhook outbox, which any instance may enqueue to.
// Each pass of its worker is logged with the deliveries it attempted.
func newOutbox(s jobdb.FencedStore, o options, log *slog.Logger) (*webhookretry.Outbox, error) {
	return webhookretry.New(context.Background(), s, webhookretry.Config{
		Secret:   []byte(o.secret),
		Interval: o.interval,
		OnError:  onError(log, webhookLease),
		OnPass: func(ctx context.Context, attempted int) {
			logPass(ctx, log, webhookLease, "webhooks attempted", "count", attempted)
		},
	})
}

// newWebhookJob returns the outbox's worker, the job that sends.
func newWebhookJob(ob *webhookretry.Outbox) *webhookretry.Worker { return ob.Worker() }

// newAirdrops returns the airdrop expiry job, whose Create the demo uses.
// Each pass is logged with the airdrops it expired.
func newAirdrops(s jobdb.FencedStore, o options, log *slog.Logger) (*airdropexpiry.Job, error) {
	return airdropexpiry.New(context.Background(), s, airdropexpiry.Config{
		Interval: o.interval,
		OnError:  onError(log, airdropLease),
		OnPass: func(ctx context.Context, expired int) {
			logPass(ctx, log, airdropLease, "airdrops expired", "count", expired)
		},
	})
}
