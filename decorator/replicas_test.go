package decorator_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

func TestReplicasRunOneJobAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		var x exclusive
		var mu sync.Mutex
		var tokens []uint64
		const n = 4
		jobs := make([]decorator.Job, n)
		inner := make([]*fakeJob, n)
		for i := range n {
			inner[i] = &fakeJob{
				startFn: func(ctx context.Context) error {
					x.enter()
					term, ok := elector.TermFromContext(ctx)
					if assert.True(t, ok, "inner Start ctx carries the term") {
						mu.Lock()
						tokens = append(tokens, term.Token())
						mu.Unlock()
					}
					return nil
				},
				stopFn: func(context.Context) error { x.leave(); return nil },
			}
			jobs[i] = decorator.Decorate[decorator.Job](inner[i], newElector(t, store, fmt.Sprintf("r%d", i)), decorator.WithLogger(discard))
			t.Cleanup(func() { _ = jobs[i].Stop(ctx) })
		}
		leaders := func() []int {
			var ls []int
			for i, j := range inner {
				if j.running() {
					ls = append(ls, i)
				}
			}
			return ls
		}
		for _, j := range jobs {
			require.NoError(t, j.Start(ctx))
		}
		synctest.Wait()
		require.Len(t, leaders(), 1)
		leader := leaders()[0]
		time.Sleep(10 * time.Second) // renewals keep it; the others poll
		synctest.Wait()
		require.Equal(t, []int{leader}, leaders())

		for round := 0; round < n-1; round++ {
			old := leaders()[0]
			require.NoError(t, jobs[old].Stop(ctx))
			synctest.Wait() // the others wake on release, no poll needed
			ls := leaders()
			require.Len(t, ls, 1, "round %d", round)
			require.NotEqual(t, old, ls[0], "round %d", round)
			time.Sleep(5 * time.Second)
			synctest.Wait()
			require.Equal(t, ls, leaders(), "round %d", round)
		}
		require.EqualValues(t, 1, x.peak.Load(), "inner jobs running at once")
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, tokens, n)
		require.True(t, slices.IsSorted(tokens) && len(slices.Compact(slices.Clone(tokens))) == n, "tokens %v strictly increase", tokens)
	})
}

func TestGracefulHandoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		ev := store.ev
		a := decorator.Decorate[decorator.Job](&fakeJob{stopFn: func(context.Context) error {
			time.Sleep(2 * time.Second) // a slow Stop that ignores its ctx
			ev.add("A inner Stop returned")
			return nil
		}}, newElector(t, store, "a"), decorator.WithLogger(discard))
		bJob := &fakeJob{startFn: func(ctx context.Context) error {
			term, _ := elector.TermFromContext(ctx)
			ev.add("B inner Start %d", term.Token())
			return nil
		}}
		b := decorator.Decorate[decorator.Job](bJob, newElector(t, store, "b"), decorator.WithLogger(discard))
		t.Cleanup(func() { _ = b.Stop(ctx) })

		require.NoError(t, a.Start(ctx))
		synctest.Wait()
		require.NoError(t, b.Start(ctx))
		synctest.Wait()
		require.Zero(t, bJob.starts.Load())

		// The caller's Stop ctx is far shorter than the inner Stop: Stop
		// returns early, but the lease is freed only after the inner Stop.
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, a.Stop(short), context.DeadlineExceeded)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		require.NoError(t, a.Stop(ctx), "Stop on a stopped job")

		require.Equal(t, []string{"A inner Stop returned", "release a 1", "B inner Start 2"}, ev.all())
		handoff := ev.at(t, "B inner Start 2").Sub(ev.at(t, "release a 1"))
		require.LessOrEqual(t, handoff, 10*time.Millisecond)
	})
}
