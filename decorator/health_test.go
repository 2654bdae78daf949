package decorator_test

import (
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

// unhealthyStore is a store whose Healthy fails while broken is set, as a
// store that can no longer lead at all does.
type unhealthyStore struct {
	*elector.MemoryStore
	broken atomic.Bool
}

func (s *unhealthyStore) Healthy(*http.Request) error {
	if s.broken.Load() {
		return errors.New("the store cannot lead")
	}
	return nil
}

// TestHealthyFollowsStore: a replica whose store says it can no longer lead
// at all says so in its health check, through the elector, and recovers
// with the store.
func TestHealthyFollowsStore(t *testing.T) {
	s := &unhealthyStore{MemoryStore: elector.NewMemoryStore()}
	e := newElector(t, s, "a")
	st, ok := decorator.StatusOf(decorator.Decorate[decorator.Job](&fakeJob{}, e))
	require.True(t, ok)
	require.NoError(t, st.Healthy(nil))

	s.broken.Store(true)
	err := st.Healthy(nil)
	require.ErrorContains(t, err, "the store cannot lead")
	require.Error(t, e.Healthy(nil), "the elector passes the store's check on")

	s.broken.Store(false)
	require.NoError(t, st.Healthy(nil))
}
