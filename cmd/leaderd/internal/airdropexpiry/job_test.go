package airdropexpiry_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/airdropexpiry"
	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/leadertest"
	"github.com/leaderaware/leaderaware/elector"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

type fixture struct {
	job      *airdropexpiry.Job
	clock    *leadertest.Clock
	counting *leadertest.CountingStore
	store    elector.Store
}

func setup(t *testing.T, b leadertest.Backend, cfg airdropexpiry.Config) fixture {
	t.Helper()
	st := b.Open(t)
	f := fixture{clock: leadertest.NewClock(t0), counting: &leadertest.CountingStore{FencedStore: st}, store: st}
	cfg.Now = f.clock.Now
	job, err := airdropexpiry.New(t.Context(), f.counting, cfg)
	require.NoError(t, err)
	f.job = job
	return f
}

func (f fixture) create(t *testing.T, deadline time.Time) int64 {
	t.Helper()
	id, err := f.job.Create(t.Context(), "0xabc", 100, deadline)
	require.NoError(t, err)
	return id
}

func (f fixture) get(t *testing.T, id int64) airdropexpiry.Airdrop {
	t.Helper()
	a, err := f.job.Get(t.Context(), id)
	require.NoError(t, err)
	return a
}

func TestExpireDueOnlyUnclaimedPastDeadline(t *testing.T) {
	leadertest.Run(t, testExpireDueOnlyUnclaimedPastDeadline)
}

func testExpireDueOnlyUnclaimedPastDeadline(t *testing.T, b leadertest.Backend) {
	f := setup(t, b, airdropexpiry.Config{})
	claimedThenPast := f.create(t, t0.Add(time.Minute))
	require.NoError(t, f.job.Claim(t.Context(), claimedThenPast))
	f.clock.Advance(time.Hour)
	now := f.clock.Now()

	past := f.create(t, now.Add(-time.Minute))
	atDeadline := f.create(t, now)
	future := f.create(t, now.Add(time.Nanosecond))

	ctx, l := leadertest.Lead(t, f.store, "airdropexpiry", "me")
	n, err := f.job.ExpireDue(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n)

	for _, id := range []int64{past, atDeadline} {
		a := f.get(t, id)
		assert.True(t, a.ExpiredAt.Equal(now), "airdrop %d: expired at %v", id, a.ExpiredAt)
		assert.Equal(t, l.Token, a.ExpiredToken)
		assert.True(t, a.ClaimedAt.IsZero())
	}
	for _, id := range []int64{claimedThenPast, future} {
		a := f.get(t, id)
		assert.True(t, a.ExpiredAt.IsZero(), "airdrop %d expired", id)
		assert.Zero(t, a.ExpiredToken)
	}

	n, err = f.job.ExpireDue(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "expired twice")
}

func TestExpireDueBatches(t *testing.T) {
	tests := []struct {
		due, batch int
		wantTx     int64
	}{
		{due: 10, batch: 3, wantTx: 4}, // 3, 3, 3, 1
		{due: 9, batch: 3, wantTx: 4},  // 3, 3, 3, 0: a full batch may hide more
		{due: 2, batch: 3, wantTx: 1},
		{due: 0, batch: 3, wantTx: 1},
	}
	for _, tt := range tests {
		leadertest.Run(t, func(t *testing.T, b leadertest.Backend) {
			f := setup(t, b, airdropexpiry.Config{BatchSize: tt.batch})
			for range tt.due {
				f.create(t, t0.Add(-time.Hour))
			}
			f.create(t, t0.Add(time.Hour)) // not due
			ctx, _ := leadertest.Lead(t, f.store, "airdropexpiry", "me")
			n, err := f.job.ExpireDue(ctx)
			require.NoError(t, err)
			assert.Equal(t, tt.due, n)
			assert.Equal(t, tt.wantTx, f.counting.Calls(), "%d due, batch %d", tt.due, tt.batch)
		})
	}
}

func TestExpireDueOldestFirst(t *testing.T) { leadertest.Run(t, testExpireDueOldestFirst) }

func testExpireDueOldestFirst(t *testing.T, b leadertest.Backend) {
	f := setup(t, b, airdropexpiry.Config{BatchSize: 2})
	late := f.create(t, t0.Add(-time.Minute))
	early1 := f.create(t, t0.Add(-3*time.Hour))
	early2 := f.create(t, t0.Add(-2*time.Hour))
	ctx, l := leadertest.Lead(t, f.store, "airdropexpiry", "me")
	// A deposed leader's second batch is refused: only the first one stays.
	f.counting.FencedStore = &refuseAfter{FencedStore: f.counting.FencedStore, n: 1, store: f.store, lease: l}
	n, err := f.job.ExpireDue(ctx)
	leadertest.RequireRefused(t, err)
	assert.Equal(t, 2, n)
	assert.False(t, f.get(t, early1).ExpiredAt.IsZero())
	assert.False(t, f.get(t, early2).ExpiredAt.IsZero())
	assert.True(t, f.get(t, late).ExpiredAt.IsZero())
}

func TestExpireDueRefusedForDeposedLeader(t *testing.T) {
	leadertest.Run(t, testExpireDueRefusedForDeposedLeader)
}

func testExpireDueRefusedForDeposedLeader(t *testing.T, b leadertest.Backend) {
	f := setup(t, b, airdropexpiry.Config{})
	ids := []int64{f.create(t, t0.Add(-time.Hour)), f.create(t, t0.Add(-time.Minute))}
	oldCtx, l := leadertest.Lead(t, f.store, "airdropexpiry", "me")
	newCtx, newLease := leadertest.Depose(t, f.store, l)

	n, err := f.job.ExpireDue(oldCtx)
	leadertest.RequireRefused(t, err)
	assert.Zero(t, n)
	for _, id := range ids {
		assert.True(t, f.get(t, id).ExpiredAt.IsZero(), "a deposed leader expired airdrop %d", id)
	}

	n, err = f.job.ExpireDue(newCtx)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, newLease.Token, f.get(t, ids[0]).ExpiredToken)
}

func TestExpireDueWithoutTerm(t *testing.T) { leadertest.Run(t, testExpireDueWithoutTerm) }

func testExpireDueWithoutTerm(t *testing.T, b leadertest.Backend) {
	f := setup(t, b, airdropexpiry.Config{})
	id := f.create(t, t0.Add(-time.Hour))
	_, err := f.job.ExpireDue(t.Context())
	require.ErrorIs(t, err, elector.ErrNoTerm)
	assert.True(t, f.get(t, id).ExpiredAt.IsZero())
}

func TestExpireDueStopsWhenContextEnds(t *testing.T) {
	leadertest.Run(t, testExpireDueStopsWhenContextEnds)
}

func testExpireDueStopsWhenContextEnds(t *testing.T, b leadertest.Backend) {
	f := setup(t, b, airdropexpiry.Config{})
	f.create(t, t0.Add(-time.Hour))
	ctx, _ := leadertest.Lead(t, f.store, "airdropexpiry", "me")
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	n, err := f.job.ExpireDue(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, n)
	assert.Zero(t, f.counting.Calls())
}

func TestClaim(t *testing.T) { leadertest.Run(t, testClaim) }

func testClaim(t *testing.T, b leadertest.Backend) {
	f := setup(t, b, airdropexpiry.Config{})
	ok := f.create(t, t0.Add(time.Hour))
	require.NoError(t, f.job.Claim(t.Context(), ok))
	assert.True(t, f.get(t, ok).ClaimedAt.Equal(t0))
	assert.ErrorContains(t, f.job.Claim(t.Context(), ok), "airdrop cannot be claimed")
	assert.ErrorContains(t, f.job.Claim(t.Context(), ok), "claimed already")

	atDeadline := f.create(t, t0)
	err := f.job.Claim(t.Context(), atDeadline)
	assert.ErrorContains(t, err, "airdrop cannot be claimed")
	assert.ErrorContains(t, err, "deadline")

	ctx, _ := leadertest.Lead(t, f.store, "airdropexpiry", "me")
	_, err = f.job.ExpireDue(ctx)
	require.NoError(t, err)
	f.clock.Advance(-time.Hour) // even before the deadline, an expired airdrop stays expired
	err = f.job.Claim(t.Context(), atDeadline)
	assert.ErrorContains(t, err, "airdrop cannot be claimed")
	assert.ErrorContains(t, err, "expired at")

	assert.ErrorContains(t, f.job.Claim(t.Context(), 999), "airdrop 999: airdrop not found")
	_, err = f.job.Get(t.Context(), 999)
	assert.ErrorContains(t, err, "airdrop 999: airdrop not found")
}

func TestCreateBadInput(t *testing.T) { leadertest.Run(t, testCreateBadInput) }

func testCreateBadInput(t *testing.T, b leadertest.Backend) {
	f := setup(t, b, airdropexpiry.Config{})
	_, err := f.job.Create(t.Context(), "", 1, t0)
	assert.EqualError(t, err, "airdropexpiry: create: empty recipient")
	_, err = f.job.Create(t.Context(), "0xabc", 0, t0)
	assert.EqualError(t, err, "airdropexpiry: create: amount 0 is not positive")
}

func TestJobExpiresBetweenStartAndStop(t *testing.T) {
	leadertest.Run(t, testJobExpiresBetweenStartAndStop)
}

func testJobExpiresBetweenStartAndStop(t *testing.T, b leadertest.Backend) {
	f := setup(t, b, airdropexpiry.Config{Interval: 10 * time.Millisecond})
	id := f.create(t, t0.Add(-time.Hour))
	ctx, _ := leadertest.Lead(t, f.store, "airdropexpiry", "me")
	require.NoError(t, f.job.Start(ctx))
	require.Eventually(t, func() bool { return !f.get(t, id).ExpiredAt.IsZero() }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, f.job.Stop(t.Context()))
	require.NoError(t, f.job.Start(ctx), "restart")
	require.NoError(t, f.job.Stop(t.Context()))
}

func TestNewBadInput(t *testing.T) {
	st := leadertest.OpenStore(t)
	for _, tt := range []struct {
		cfg  airdropexpiry.Config
		want string
	}{
		{airdropexpiry.Config{Interval: -1}, "airdropexpiry: Interval -1ns is negative"},
		{airdropexpiry.Config{Jitter: -0.5}, "airdropexpiry: Jitter -0.5 is not in [0, 1)"},
		{airdropexpiry.Config{BatchSize: -3}, "airdropexpiry: BatchSize -3 is negative"},
		{airdropexpiry.Config{Timeout: -time.Second}, "airdropexpiry: Timeout -1s is negative"},
	} {
		_, err := airdropexpiry.New(t.Context(), st, tt.cfg)
		assert.EqualError(t, err, tt.want)
	}
	_, err := airdropexpiry.New(t.Context(), nil, airdropexpiry.Config{})
	assert.EqualError(t, err, "airdropexpiry: nil store")
}

// TestOnPassAndPending: every periodic pass reports how many airdrops it
// expired to OnPass (0 once none is due), with the term in ctx; Pending
// counts the airdrops neither claimed nor expired.
func TestOnPassAndPending(t *testing.T) { leadertest.Run(t, testOnPassAndPending) }

func testOnPassAndPending(t *testing.T, b leadertest.Backend) {
	type pass struct {
		token   uint64
		expired int
	}
	passes := make(chan pass, 100)
	f := setup(t, b, airdropexpiry.Config{
		Interval: 10 * time.Millisecond,
		OnPass: func(ctx context.Context, n int) {
			l, _ := elector.LeaseFromContext(ctx)
			passes <- pass{l.Token, n}
		},
	})
	f.create(t, t0.Add(-time.Hour))
	f.create(t, t0.Add(-time.Minute))
	f.create(t, t0.Add(time.Hour))
	claimed := f.create(t, t0.Add(time.Hour))
	require.NoError(t, f.job.Claim(t.Context(), claimed))
	pending, err := f.job.Pending(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 3, pending)

	ctx, l := leadertest.Lead(t, f.store, "airdropexpiry", "me")
	require.NoError(t, f.job.Start(ctx))
	assert.Equal(t, pass{l.Token, 2}, <-passes)
	assert.Equal(t, pass{l.Token, 0}, <-passes)
	require.NoError(t, f.job.Stop(t.Context()))
	pending, err = f.job.Pending(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, pending)
}
