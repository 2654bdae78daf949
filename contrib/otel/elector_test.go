package leaderotel_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// Two replicas, each with its own Observer, campaign for one lease on a
// memory store: what each one's Collect returns while a leads, after it
// resigns, and once b leads.
func TestCollectOfLeaseElectors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := elector.NewMemoryStore()
		newElector := func(holder string) (*elector.LeaseElector, replica) {
			r := newReplica(t)
			e, err := elector.New(store, "prices", elector.Config{TTL: 3 * time.Second, RenewInterval: time.Second, RetryInterval: 2 * time.Second, Holder: holder, Observer: r})
			require.NoError(t, err)
			return e, r
		}
		a, ra := newElector("a")
		b, rb := newElector("b")
		prices := lease("prices")

		termA, err := a.Campaign(t.Context())
		require.NoError(t, err)
		time.Sleep(1500 * time.Millisecond) // one renewal, at 1s
		got := ra.collect(t)
		require.Len(t, got, 7, "all but the job transitions")
		expect(t, got,
			// Without a decorated job reporting to it, leaderaware.leader stays 0.
			leaderMetric(point[int64](0, prices)),
			tokenMetric(point[int64](1, prices)),
			electionsMetric(point[int64](1, prices)),
			demotionsMetric("prices", nil),
			trustMetric(point(2.2, prices)),
			fencedMetric("prices", 0, 0),
			storeOpsMetric(histPoint(storeBounds, storeOp("acquire", ""), 0), histPoint(storeBounds, storeOp("renew", ""), 0)),
		)

		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		_, err = b.Campaign(ctx)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		expect(t, rb.collect(t),
			electionsMetric(point[int64](0, prices)),
			trustMetric(point(0.0, prices)),
			storeOpsMetric(histPoint(storeBounds, storeOp("acquire", "held"), 0)),
		)

		require.NoError(t, termA.Resign(t.Context()))
		expect(t, ra.collect(t),
			trustMetric(point(0.0, prices)),
			storeOpsMetric(histPoint(storeBounds, storeOp("acquire", ""), 0), histPoint(storeBounds, storeOp("renew", ""), 0),
				histPoint(storeBounds, storeOp("release", ""), 0)),
		)

		termB, err := b.Campaign(t.Context())
		require.NoError(t, err)
		expect(t, rb.collect(t),
			electionsMetric(point[int64](1, prices)),
			tokenMetric(point[int64](2, prices)),
			trustMetric(point(2.7, prices)),
		)
		require.NoError(t, termB.Resign(t.Context()))
	})
}
