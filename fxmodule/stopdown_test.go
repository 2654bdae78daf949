package fxmodule_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/goleak"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/fxmodule"
)

// hangStore is a MemoryStore whose calls, once down is set, block until
// their context ends: a database that stopped answering.
type hangStore struct {
	*elector.MemoryStore
	down atomic.Bool
}

func (s *hangStore) hang(ctx context.Context) error {
	if !s.down.Load() {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (s *hangStore) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	if err := s.hang(ctx); err != nil {
		return elector.Lease{}, err
	}
	return s.MemoryStore.TryAcquire(ctx, name, holder, ttl, observed)
}

func (s *hangStore) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	if err := s.hang(ctx); err != nil {
		return elector.Lease{}, err
	}
	return s.MemoryStore.Renew(ctx, l, ttl)
}

func (s *hangStore) Release(ctx context.Context, l elector.Lease) error {
	if err := s.hang(ctx); err != nil {
		return err
	}
	return s.MemoryStore.Release(ctx, l)
}

func (s *hangStore) Get(ctx context.Context, name string) (elector.Lease, error) {
	if err := s.hang(ctx); err != nil {
		return elector.Lease{}, err
	}
	return s.MemoryStore.Get(ctx, name)
}

// TestStopStoreDown: with the store hanging, stopping the app (which
// drains first) stays within its stop context, stops every inner job, and
// leaves time for the hooks after the drain (fx runs none once the stop
// context has ended), so no goroutine of the app outlives the decorator's
// stop timeout.
func TestStopStoreDown(t *testing.T) {
	before := goleak.IgnoreCurrent()
	store := &hangStore{MemoryStore: elector.NewMemoryStore()}
	var reg *fxmodule.Registry
	cfg := fast
	cfg.Holder = "app-a"
	const jobStop = 300 * time.Millisecond
	app := fxtestNew(t,
		fxmodule.Module(fxmodule.Config{Elector: cfg}),
		fxmodule.WithStore(store),
		fx.Provide(
			func() *jobX { return &jobX{newCountingJob(nil)} },
			func() *jobY { return &jobY{newCountingJob(nil)} },
		),
		fxmodule.LeaderJob[*jobX]("x", decorator.WithStopTimeout(jobStop)),
		fxmodule.LeaderJob[*jobY]("y", decorator.WithStopTimeout(jobStop)),
		fx.Populate(&reg),
	).RequireStart()
	require.Eventually(t, func() bool { return len(leading(reg)) == 2 }, 10*time.Second, 10*time.Millisecond,
		"app-a should lead both jobs: %v", leaders(t, store.MemoryStore))

	store.down.Store(true)
	const stopTimeout = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	start := time.Now()
	_ = app.Stop(ctx)
	took := time.Since(start)
	assert.Less(t, took, stopTimeout+2*time.Second, "Stop with the store down should end within its context")
	assert.Empty(t, leading(reg), "a job still runs after Stop")
	goleak.VerifyNone(t, before)
}
