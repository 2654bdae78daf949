package jobs_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/jobs"
)

// TestEveryLastRun: LastRun has the start and end of the last run, zero
// end while it runs, and the last error until another run fails, not the
// cancellation at Stop.
func TestEveryLastRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		boom := errors.New("boom")
		n := 0
		j := jobs.Every(time.Minute, func(ctx context.Context) error {
			n++
			switch n {
			case 1:
				time.Sleep(10 * time.Second)
				return boom
			case 2:
				return nil
			}
			<-ctx.Done()
			return ctx.Err()
		}, jobs.WithErrorHandler(func(context.Context, error) {}))
		assert.Equal(t, jobs.RunReport{}, j.LastRun(), "before the first run")
		require.NoError(t, j.Start(t.Context()))

		time.Sleep(time.Minute + time.Second)
		assert.Equal(t, jobs.RunReport{Started: t0.Add(time.Minute)}, j.LastRun(), "while the first run runs")
		time.Sleep(10 * time.Second)
		first := jobs.RunReport{Started: t0.Add(time.Minute), Ended: t0.Add(70 * time.Second), Err: boom, ErrAt: t0.Add(70 * time.Second)}
		assert.Equal(t, first, j.LastRun(), "after the failed run")

		time.Sleep(time.Minute)
		second := jobs.RunReport{Started: t0.Add(2 * time.Minute), Ended: t0.Add(2 * time.Minute), Err: boom, ErrAt: t0.Add(70 * time.Second)}
		assert.Equal(t, second, j.LastRun(), "a run that succeeds keeps the last error")

		time.Sleep(time.Minute)
		require.NoError(t, j.Stop(t.Context()))
		third := jobs.RunReport{Started: t0.Add(3 * time.Minute), Ended: t0.Add(3*time.Minute + 11*time.Second), Err: boom, ErrAt: t0.Add(70 * time.Second)}
		assert.Equal(t, third, j.LastRun(), "the run that Stop ended has no error of its own")
	})
}

// TestRunLastRun: the job of Run reports its function's start, and its end
// and error once it returns.
func TestRunLastRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		boom := errors.New("boom")
		j := jobs.Run(func(ctx context.Context) error {
			time.Sleep(time.Second)
			return boom
		}, jobs.WithErrorHandler(func(context.Context, error) {}))
		last := func() jobs.RunReport { return j.(interface{ LastRun() jobs.RunReport }).LastRun() }
		require.NoError(t, j.Start(t.Context()))
		synctest.Wait()
		assert.Equal(t, jobs.RunReport{Started: t0}, last(), "while fn runs")
		time.Sleep(2 * time.Second)
		assert.Equal(t, jobs.RunReport{Started: t0, Ended: t0.Add(time.Second), Err: boom, ErrAt: t0.Add(time.Second)}, last())
		require.NoError(t, j.Stop(t.Context()))
	})
}
