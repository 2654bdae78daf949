package statuspage_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/jobs"
	"github.com/leaderaware/leaderaware/statuspage"
)

// decoratedSource is a Source of one decorated job, as fxmodule.Registry
// would be.
type decoratedSource struct {
	store elector.Store
	lease string
	job   decorator.Job
}

func (s decoratedSource) Jobs() []decorator.Snapshot {
	st, _ := decorator.StatusOf(s.job)
	return []decorator.Snapshot{st.Snapshot()}
}
func (s decoratedSource) Store() elector.Store { return s.store }
func (s decoratedSource) Job(lease string) decorator.Job {
	if lease == s.lease {
		return s.job
	}
	return nil
}

// TestDecoratedEvery: the page finds the last run of a jobs.Every inside
// a decorated job, and shows the term it leads.
func TestDecoratedEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := elector.NewMemoryStore()
		e, err := elector.New(store, "tick", elector.Config{TTL: 3 * time.Second, Holder: "me"})
		require.NoError(t, err)
		boom := errors.New("boom")
		job := decorator.Decorate[decorator.Job](jobs.Every(time.Second, func(context.Context) error {
			time.Sleep(100 * time.Millisecond)
			return boom
		}, jobs.WithImmediate(), jobs.WithErrorHandler(func(context.Context, error) {})), e)
		require.NoError(t, job.Start(t.Context()))
		time.Sleep(1500 * time.Millisecond)
		h := statuspage.Handler(decoratedSource{store: store, lease: "tick", job: job})
		_, st := status(t, h, "/leases")
		require.NoError(t, job.Stop(t.Context()))

		require.Len(t, st.Jobs, 1)
		j := st.Jobs[0]
		assert.True(t, j.Leading)
		assert.Equal(t, "me", j.Holder)
		assert.True(t, j.Healthy)
		require.NotNil(t, j.LastRun, "the LastRun of the jobs.Every inside")
		require.NotNil(t, j.LastRun.Started)
		require.NotNil(t, j.LastRun.Ended)
		assert.Equal(t, "100ms", j.LastRun.Duration)
		assert.Equal(t, "boom", j.LastRun.Error)
		require.Len(t, st.Leases, 1)
		assert.Equal(t, "me", st.Leases[0].Holder)
		assert.Equal(t, j.Token, st.Leases[0].Token)
	})
}
