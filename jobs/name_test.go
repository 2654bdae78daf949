package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/jobs"
)

// TestWithNameNamesTheDecoratedJob: the name given with WithName is the
// decorated job's name in its status, for Run and for Every.
func TestWithNameNamesTheDecoratedJob(t *testing.T) {
	fn := func(context.Context) error { return nil }
	for _, j := range []decorator.Job{
		jobs.Run(fn, jobs.WithName("queue-worker")),
		jobs.Every(time.Minute, fn, jobs.WithName("queue-worker")),
	} {
		e, err := elector.New(elector.NewMemoryStore(), "name-test", elector.Config{Holder: "a"})
		require.NoError(t, err)
		st, ok := decorator.StatusOf(decorator.Decorate(j, e))
		require.True(t, ok)
		require.Equal(t, "queue-worker", st.Snapshot().Job)
	}
}
