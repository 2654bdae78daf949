package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/airdropexpiry"
	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/webhookretry"
)

// Demo airdrops: when fewer than seedBelow are pending at start, the
// instance creates seedCount, with deadlines one -interval apart from one
// -interval on, so that airdrop-expiry has something to do.
const (
	seedBelow = 3
	seedCount = 5
)

// seedAirdrops appends an OnStart hook that creates the demo airdrops if
// the table is nearly empty. Any instance may create airdrops; only the
// leader of airdrop-expiry expires them.
func seedAirdrops(lc fx.Lifecycle, j *airdropexpiry.Job, o options, log *slog.Logger) {
	lc.Append(fx.StartHook(func(ctx context.Context) error {
		pending, err := j.Pending(ctx)
		if err != nil {
			return fmt.Errorf("leaderd: %w", err)
		}
		if pending >= seedBelow {
			return nil
		}
		now := time.Now()
		for i := range seedCount {
			if _, err := j.Create(ctx, fmt.Sprintf("demo-%d", i+1), 100*int64(i+1), now.Add(time.Duration(i+1)*o.interval)); err != nil {
				return err
			}
		}
		log.InfoContext(ctx, "airdrops created", "job", airdropLease, "count", seedCount,
			"deadlines", fmt.Sprintf("in %v to %v", o.interval, seedCount*o.interval))
		return nil
	}))
}

// enqueueWebhooks appends hooks that, if o.webhookURL is set, enqueue a
// demo webhook to it every o.interval while the app runs. Any instance may
// enqueue; only the leader of webhook-retry sends.
func enqueueWebhooks(lc fx.Lifecycle, ob *webhookretry.Outbox, o options, log *slog.Logger) {
	if o.webhookURL == "" {
		return
	}
	var (
		cancel context.CancelFunc
		wg     sync.WaitGroup
	)
	lc.Append(fx.StartStopHook(
		func() {
			ctx, c := context.WithCancel(context.Background())
			cancel = c
			wg.Go(func() { feedWebhooks(ctx, ob, o, log) })
		},
		func() {
			cancel()
			wg.Wait()
		},
	))
}

// feedWebhooks enqueues a webhook every o.interval until ctx ends.
func feedWebhooks(ctx context.Context, ob *webhookretry.Outbox, o options, log *slog.Logger) {
	t := time.NewTicker(o.interval)
	defer t.Stop()
	for seq := 1; ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		payload, _ := json.Marshal(map[string]any{"event": "leaderd.demo", "from": o.holder, "seq": seq, "at": time.Now().UTC()})
		id, err := ob.Enqueue(ctx, o.webhookURL, payload)
		if err != nil {
			if ctx.Err() == nil {
				log.WarnContext(ctx, "webhook enqueue failed", "job", webhookLease, "err", err)
			}
			continue
		}
		log.InfoContext(ctx, "webhook enqueued", "job", webhookLease, "id", id, "url", o.webhookURL)
	}
}
