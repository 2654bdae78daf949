package decorator_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/clock"
	"github.com/leaderaware/leaderaware/internal/testing/stepclock"
)

// tickingJob ticks every 100 ms on a goroutine that Start launches with the
// job's context and Stop cancels and waits for. It records, per run, the
// ticks and when the run's context ended.
type tickingJob struct {
	mu     sync.Mutex
	runs   []*tickingRun
	cancel context.CancelFunc
	done   chan struct{}
}

type tickingRun struct {
	ticks int
	ended time.Time // zero while the run's context is live
}

func (j *tickingJob) Start(ctx context.Context) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &tickingRun{}
	j.runs = append(j.runs, r)
	j.cancel, j.done = cancel, make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				j.mu.Lock()
				r.ended = time.Now()
				j.mu.Unlock()
				return
			case <-tick.C:
				j.mu.Lock()
				r.ticks++
				j.mu.Unlock()
			}
		}
	}(j.done)
	return nil
}

func (j *tickingJob) Stop(ctx context.Context) error {
	j.mu.Lock()
	cancel, done := j.cancel, j.done
	j.mu.Unlock()
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// firstRun returns a copy of the job's first run.
func (j *tickingJob) firstRun() tickingRun {
	j.mu.Lock()
	defer j.mu.Unlock()
	return *j.runs[0]
}

// TestSuspendStopsJobAtOnce: after a suspend past the trust window, the
// decorator stops the job (its context ends, its Stop returns) after at most
// one more tick, not RenewInterval (45 ticks at the defaults) later.
func TestSuspendStopsJobAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := stepclock.New()
		store := newCountingStore()
		store.Carrier = clock.Carry(c)
		e, err := elector.New(store, leaseName, elector.Config{Holder: "a"})
		require.NoError(t, err)
		job := &tickingJob{}
		d := decorator.Decorate[decorator.Job](job, e, decorator.WithLogger(discard))
		require.NoError(t, d.Start(t.Context()))
		defer func() { require.NoError(t, d.Stop(context.Background())) }()
		time.Sleep(time.Second + 50*time.Millisecond)
		require.Equal(t, 10, job.firstRun().ticks, "ticks before the suspend")

		c.Suspend(time.Minute)
		resumed := time.Now()
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		first := job.firstRun()
		require.False(t, first.ended.IsZero(), "the job's context is still live 100 ms after a resume past the trust window")
		assert.Less(t, first.ended.Sub(resumed), 100*time.Millisecond, "the job's context ended")
		assert.LessOrEqual(t, first.ticks-10, 1, "ticks after the resume")
		assert.Zero(t, store.renews.Load(), "renewals after the trust window closed")
	})
}
