package jobs_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/jobs"
)

// Two replicas of a decorated periodic job: only the leader runs it, its
// runs see the leader's term, and after the leader stops the other replica
// takes over without any overlap.
func TestEveryDecoratedRunsOnOneReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := elector.NewMemoryStore()
		var inFlight, maxInFlight atomic.Int64
		var mu sync.Mutex
		runsBy := map[string]int{}
		tokens := map[string]uint64{}

		replica := func(holder string) decorator.Job {
			e, err := elector.New(store, "every-test", elector.Config{TTL: 9 * time.Second, Holder: holder})
			require.NoError(t, err)
			job := jobs.Every(time.Second, func(ctx context.Context) error {
				n := inFlight.Add(1)
				defer inFlight.Add(-1)
				if n > maxInFlight.Load() {
					maxInFlight.Store(n)
				}
				term, ok := elector.TermFromContext(ctx)
				if !assert.True(t, ok, "run without a term") {
					return nil
				}
				mu.Lock()
				runsBy[holder]++
				tokens[holder] = term.Token()
				mu.Unlock()
				time.Sleep(300 * time.Millisecond)
				return nil
			}, jobs.WithImmediate())
			return decorator.Decorate[decorator.Job](job, e,
				decorator.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		}
		a, b := replica("a"), replica("b")
		require.NoError(t, a.Start(t.Context()))
		synctest.Wait()
		require.NoError(t, b.Start(t.Context()))
		time.Sleep(10*time.Second + 100*time.Millisecond)

		mu.Lock()
		assert.Equal(t, map[string]int{"a": 11}, runsBy, "only the leader runs")
		mu.Unlock()

		require.NoError(t, a.Stop(t.Context()))
		time.Sleep(10 * time.Second)
		require.NoError(t, b.Stop(t.Context()))

		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, 11, runsBy["a"], "a ran after Stop")
		assert.GreaterOrEqual(t, runsBy["b"], 9, "b did not take over")
		assert.Greater(t, tokens["b"], tokens["a"], "b's term has a larger token")
		assert.Equal(t, int64(1), maxInFlight.Load(), "runs overlapped across replicas")
	})
}

// Two replicas of a decorated Run job: only the leader runs fn, with its
// term in the context; fn's context ends when the leader stops, and the
// other replica takes over, without overlap.
func TestRunDecoratedRunsOnOneReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := elector.NewMemoryStore()
		var mu sync.Mutex
		var running []string
		var tokens []uint64
		replica := func(holder string) decorator.Job {
			e, err := elector.New(store, "run-test", elector.Config{TTL: 9 * time.Second, Holder: holder})
			require.NoError(t, err)
			job := jobs.Run(func(ctx context.Context) error {
				l, ok := elector.LeaseFromContext(ctx)
				assert.True(t, ok, "fn's context has no term")
				mu.Lock()
				running = append(running, holder)
				tokens = append(tokens, l.Token)
				assert.Len(t, running, 1, "fn runs on two replicas")
				mu.Unlock()
				<-ctx.Done()
				mu.Lock()
				running = running[1:]
				mu.Unlock()
				return ctx.Err()
			})
			return decorator.Decorate(job, e, decorator.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		}
		a, b := replica("a"), replica("b")
		require.NoError(t, a.Start(t.Context()))
		synctest.Wait()
		require.NoError(t, b.Start(t.Context()))
		time.Sleep(time.Minute)
		mu.Lock()
		assert.Equal(t, []string{"a"}, running)
		mu.Unlock()

		require.NoError(t, a.Stop(t.Context()))
		synctest.Wait()
		mu.Lock()
		assert.Equal(t, []string{"b"}, running, "b takes over once a's fn has returned")
		assert.Equal(t, []uint64{1, 2}, tokens)
		mu.Unlock()
		require.NoError(t, b.Stop(t.Context()))
	})
}
