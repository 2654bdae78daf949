package decorator_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
)

// selfNamedJob names itself with a Name method.
type selfNamedJob struct{ fakeJob }

func (*selfNamedJob) Name() string { return "queue-worker" }

// TestJobNamesItself: a job with a Name method is shown by that name in its
// status, not by its Go type.
func TestJobNamesItself(t *testing.T) {
	d := decorator.Decorate[decorator.Job](&selfNamedJob{}, newElector(t, newCountingStore(), "a"))
	st, _ := decorator.StatusOf(d)
	require.Equal(t, "queue-worker", st.Snapshot().Job)
	require.Contains(t, d.(interface{ String() string }).String(), "queue-worker")
}
