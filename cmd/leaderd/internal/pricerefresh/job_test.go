package pricerefresh_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/leadertest"
	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/pricerefresh"
	"github.com/leaderaware/leaderaware/elector"
)

// fakeSource returns whatever it is set to and counts calls.
type fakeSource struct {
	mu     sync.Mutex
	prices []pricerefresh.Price
	err    error
	calls  atomic.Int64
}

func (s *fakeSource) set(prices []pricerefresh.Price, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prices, s.err = prices, err
}

func (s *fakeSource) Prices(ctx context.Context) ([]pricerefresh.Price, error) {
	s.calls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.prices, s.err
}

var now = time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)

func newJob(t *testing.T, b leadertest.Backend, src pricerefresh.PriceSource, cfg pricerefresh.Config) (*pricerefresh.Job, *leadertest.CountingStore, elector.Store) {
	t.Helper()
	st := b.Open(t)
	counting := &leadertest.CountingStore{FencedStore: st}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return now }
	}
	job, err := pricerefresh.New(t.Context(), counting, src, cfg)
	require.NoError(t, err)
	return job, counting, st
}

func latest(t *testing.T, job *pricerefresh.Job) []pricerefresh.Quote {
	t.Helper()
	q, err := job.Latest(t.Context())
	require.NoError(t, err)
	return q
}

func TestRefreshUpsertsAsLeader(t *testing.T) { leadertest.Run(t, testRefreshUpsertsAsLeader) }

func testRefreshUpsertsAsLeader(t *testing.T, b leadertest.Backend) {
	src := &fakeSource{prices: []pricerefresh.Price{{"BTC", 64000.5}, {"ETH", 3100}}}
	job, counting, st := newJob(t, b, src, pricerefresh.Config{})
	ctx, l := leadertest.Lead(t, st, "pricerefresh", "me")

	require.NoError(t, job.Refresh(ctx))
	assert.Equal(t, []pricerefresh.Quote{
		{Symbol: "BTC", Value: 64000.5, FetchedAt: now, Token: l.Token},
		{Symbol: "ETH", Value: 3100, FetchedAt: now, Token: l.Token},
	}, utc(latest(t, job)))

	src.set([]pricerefresh.Price{{"ETH", 3200}, {"SOL", 150}}, nil)
	require.NoError(t, job.Refresh(ctx))
	assert.Equal(t, []pricerefresh.Quote{
		{Symbol: "BTC", Value: 64000.5, FetchedAt: now, Token: l.Token},
		{Symbol: "ETH", Value: 3200, FetchedAt: now, Token: l.Token},
		{Symbol: "SOL", Value: 150, FetchedAt: now, Token: l.Token},
	}, utc(latest(t, job)))
	assert.Equal(t, int64(2), counting.Committed(), "one fenced transaction per refresh")
}

func TestRefreshRefusedForDeposedLeader(t *testing.T) {
	leadertest.Run(t, testRefreshRefusedForDeposedLeader)
}

func testRefreshRefusedForDeposedLeader(t *testing.T, b leadertest.Backend) {
	src := &fakeSource{prices: []pricerefresh.Price{{"BTC", 1}}}
	job, _, st := newJob(t, b, src, pricerefresh.Config{})
	oldCtx, oldLease := leadertest.Lead(t, st, "pricerefresh", "me")
	require.NoError(t, job.Refresh(oldCtx))
	before := latest(t, job)

	newCtx, newLease := leadertest.Depose(t, st, oldLease)
	src.set([]pricerefresh.Price{{"BTC", 2}, {"ETH", 3}}, nil)
	err := job.Refresh(oldCtx)
	leadertest.RequireRefused(t, err)
	assert.ErrorContains(t, err, "pricerefresh: store 2 prices")
	assert.Equal(t, before, latest(t, job), "a deposed leader wrote")

	require.NoError(t, job.Refresh(newCtx), "the new leader writes")
	for _, q := range latest(t, job) {
		assert.Equal(t, newLease.Token, q.Token)
	}
}

func TestRefreshWithoutTerm(t *testing.T) { leadertest.Run(t, testRefreshWithoutTerm) }

func testRefreshWithoutTerm(t *testing.T, b leadertest.Backend) {
	src := &fakeSource{prices: []pricerefresh.Price{{"BTC", 1}}}
	job, counting, _ := newJob(t, b, src, pricerefresh.Config{})
	err := job.Refresh(t.Context())
	require.ErrorIs(t, err, elector.ErrNoTerm)
	assert.Zero(t, src.calls.Load(), "fetched without a term")
	assert.Zero(t, counting.Calls())
	assert.Empty(t, latest(t, job))
}

func TestRefreshSourceError(t *testing.T) { leadertest.Run(t, testRefreshSourceError) }

func testRefreshSourceError(t *testing.T, b leadertest.Backend) {
	errDown := errors.New("source down")
	src := &fakeSource{err: errDown}
	job, counting, st := newJob(t, b, src, pricerefresh.Config{})
	ctx, _ := leadertest.Lead(t, st, "pricerefresh", "me")
	require.ErrorIs(t, job.Refresh(ctx), errDown)
	assert.Zero(t, counting.Calls())

	src.set([]pricerefresh.Price{{"", 1}}, nil)
	assert.ErrorContains(t, job.Refresh(ctx), "price source returned bad prices: empty symbol")
	assert.Empty(t, latest(t, job))
}

func TestJobRefreshesBetweenStartAndStop(t *testing.T) {
	leadertest.Run(t, testJobRefreshesBetweenStartAndStop)
}

func testJobRefreshesBetweenStartAndStop(t *testing.T, b leadertest.Backend) {
	src := pricerefresh.NewSimulatedSource(7, nil)
	job, counting, st := newJob(t, b, src, pricerefresh.Config{Interval: 10 * time.Millisecond})
	ctx, l := leadertest.Lead(t, st, "pricerefresh", "me")
	startCtx, cancel := context.WithTimeout(ctx, time.Second)
	require.NoError(t, job.Start(startCtx))
	cancel() // like fx's start deadline: the job keeps running
	require.Eventually(t, func() bool { return counting.Committed() >= 3 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, job.Stop(t.Context()))
	n := counting.Calls()
	q := latest(t, job)
	require.Len(t, q, 3)
	assert.Equal(t, l.Token, q[0].Token)

	require.NoError(t, job.Start(ctx), "restart")
	require.Eventually(t, func() bool { return counting.Calls() > n }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, job.Stop(t.Context()))
}

func TestJobReportsRefusedWrites(t *testing.T) { leadertest.Run(t, testJobReportsRefusedWrites) }

func testJobReportsRefusedWrites(t *testing.T, b leadertest.Backend) {
	src := &fakeSource{prices: []pricerefresh.Price{{"BTC", 1}}}
	errs := make(chan error, 100)
	job, _, st := newJob(t, b, src, pricerefresh.Config{
		Interval: 10 * time.Millisecond,
		OnError: func(ctx context.Context, err error) {
			select {
			case errs <- err:
			default:
			}
		},
	})
	ctx, l := leadertest.Lead(t, st, "pricerefresh", "me")
	leadertest.Depose(t, st, l)
	require.NoError(t, job.Start(ctx))
	err := <-errs
	require.NoError(t, job.Stop(t.Context()))
	leadertest.RequireRefused(t, err)
	assert.Empty(t, latest(t, job))
}

func TestNewBadInput(t *testing.T) {
	st := leadertest.OpenStore(t)
	src := &fakeSource{}
	tests := []struct {
		cfg  pricerefresh.Config
		want string
	}{
		{pricerefresh.Config{Interval: -time.Second}, "pricerefresh: Interval -1s is negative"},
		{pricerefresh.Config{Jitter: 1}, "pricerefresh: Jitter 1 is not in [0, 1)"},
		{pricerefresh.Config{Timeout: -time.Minute}, "pricerefresh: Timeout -1m0s is negative"},
	}
	for _, tt := range tests {
		_, err := pricerefresh.New(t.Context(), st, src, tt.cfg)
		assert.EqualError(t, err, tt.want)
	}
	_, err := pricerefresh.New(t.Context(), nil, src, pricerefresh.Config{})
	assert.EqualError(t, err, "pricerefresh: nil store")
	_, err = pricerefresh.New(t.Context(), st, nil, pricerefresh.Config{})
	assert.EqualError(t, err, "pricerefresh: nil price source")
}

func utc(qs []pricerefresh.Quote) []pricerefresh.Quote {
	for i := range qs {
		qs[i].FetchedAt = qs[i].FetchedAt.UTC()
	}
	return qs
}

// TestOnPassReportsEachRefresh: every periodic refresh that stored prices
// reports them to OnPass, with the writing term in ctx.
func TestOnPassReportsEachRefresh(t *testing.T) { leadertest.Run(t, testOnPassReportsEachRefresh) }

func testOnPassReportsEachRefresh(t *testing.T, b leadertest.Backend) {
	src := &fakeSource{prices: []pricerefresh.Price{{"BTC", 1}}}
	type pass struct {
		token  uint64
		prices []pricerefresh.Price
	}
	passes := make(chan pass, 100)
	job, _, st := newJob(t, b, src, pricerefresh.Config{
		Interval: 10 * time.Millisecond,
		OnPass: func(ctx context.Context, prices []pricerefresh.Price) {
			l, _ := elector.LeaseFromContext(ctx)
			passes <- pass{l.Token, prices}
		},
	})
	ctx, l := leadertest.Lead(t, st, "pricerefresh", "me")
	require.NoError(t, job.Start(ctx))
	for range 2 {
		assert.Equal(t, pass{l.Token, []pricerefresh.Price{{"BTC", 1}}}, <-passes)
	}
	require.NoError(t, job.Stop(t.Context()))
}
