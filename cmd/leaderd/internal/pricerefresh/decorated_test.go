package pricerefresh_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/leadertest"
	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/pricerefresh"
	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

var _ decorator.Job = (*pricerefresh.Job)(nil)

// The whole stack: two replicas, each with its own store handle on one
// database (SQLite file or PostgreSQL schema), run the decorated job. Only
// the leader's token ever appears in the table; after the leader stops, the
// other replica takes over.
func TestDecoratedReplicas(t *testing.T) { leadertest.Run(t, testDecoratedReplicas) }

func testDecoratedReplicas(t *testing.T, db leadertest.Backend) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	type replica struct {
		job   decorator.Job
		raw   *pricerefresh.Job
		store leadertest.Store
	}
	newReplica := func(holder string) replica {
		st := db.Open(t)
		e, err := elector.New(st, "pricerefresh", elector.Config{
			TTL: 2 * time.Second, RetryInterval: 50 * time.Millisecond, Holder: holder,
		})
		require.NoError(t, err)
		raw, err := pricerefresh.New(t.Context(), st, pricerefresh.NewSimulatedSource(1, nil),
			pricerefresh.Config{Interval: 20 * time.Millisecond})
		require.NoError(t, err)
		return replica{decorator.Decorate[decorator.Job](raw, e, decorator.WithLogger(quiet)), raw, st}
	}
	a := newReplica("a")
	require.NoError(t, a.job.Start(t.Context()))
	var first elector.Lease
	require.Eventually(t, func() bool {
		l, err := a.store.Get(t.Context(), "pricerefresh")
		first = l
		return err == nil && l.Holder == "a"
	}, 10*time.Second, 10*time.Millisecond)
	b := newReplica("b")
	require.NoError(t, b.job.Start(t.Context()))

	tokenIs := func(want uint64) func() bool {
		return func() bool {
			q, err := b.raw.Latest(t.Context())
			return err == nil && len(q) == 3 && q[0].Token == want
		}
	}
	require.Eventually(t, tokenIs(first.Token), 10*time.Second, 10*time.Millisecond)

	require.NoError(t, a.job.Stop(t.Context()))
	var second elector.Lease
	require.Eventually(t, func() bool {
		l, err := b.store.Get(t.Context(), "pricerefresh")
		second = l
		return err == nil && l.Holder == "b"
	}, 10*time.Second, 10*time.Millisecond)
	assert.Greater(t, second.Token, first.Token)
	require.Eventually(t, tokenIs(second.Token), 10*time.Second, 10*time.Millisecond)

	// A's old term can no longer write, even through the raw job.
	stale := elector.ContextWithTerm(t.Context(), staleTerm{first})
	require.ErrorIs(t, a.raw.Refresh(stale), elector.ErrLeaseLost)
	require.NoError(t, b.job.Stop(t.Context()))
}

// staleTerm is a term that still claims an old lease.
type staleTerm struct{ l elector.Lease }

func (s staleTerm) Token() uint64                    { return s.l.Token }
func (s staleTerm) Done() <-chan struct{}            { return nil }
func (s staleTerm) Err() error                       { return nil }
func (s staleTerm) Resign(ctx context.Context) error { return nil }
func (s staleTerm) Lease() elector.Lease             { return s.l }
func (s staleTerm) Abandon()                         {}
func (s staleTerm) TrustRemaining() time.Duration    { return time.Minute }
