package replicatest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/fxmodule"
)

// FxWithStore runs one replica as the fx app of the store's Example_fx, on
// store: with fxmodule.WithStore, the job campaigns in store (its lease
// shows up there, under the app's holder), the module's own SQLite file is
// never created, and the app's Stop stops the job and frees the lease.
func FxWithStore(t *testing.T, store elector.Store) {
	ctx := func() context.Context {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	sqlite := filepath.Join(t.TempDir(), "leases.db")
	job := &fxJob{started: make(chan struct{}), stopped: make(chan struct{})}
	app := fx.New(
		fx.NopLogger,
		fxmodule.Module(fxmodule.Config{Store: fxmodule.SQLite(sqlite), Elector: elector.Config{Holder: "fx-replica"}}),
		fxmodule.WithStore(store),
		fx.Provide(func() *fxJob { return job }),
		fxmodule.LeaderJob[*fxJob]("fx-job"),
	)
	require.NoError(t, app.Err())
	require.NoError(t, app.Start(ctx()))
	select {
	case <-job.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not start within 10s")
	}
	l, err := store.Get(ctx(), "fx-job")
	require.NoError(t, err, "the job holds its lease in the store")
	assert.Equal(t, "fx-replica", l.Holder)

	require.NoError(t, app.Stop(ctx()))
	select {
	case <-job.stopped:
	default:
		t.Fatal("the app's Stop returned before the job stopped")
	}
	_, err = store.Get(ctx(), "fx-job")
	require.ErrorIs(t, err, elector.ErrNoLease, "the app's Stop frees the lease")
	_, err = os.Stat(sqlite)
	assert.ErrorIs(t, err, os.ErrNotExist, "WithStore: the module opens no SQLite file")
}

type fxJob struct{ started, stopped chan struct{} }

func (j *fxJob) Start(context.Context) error { close(j.started); return nil }
func (j *fxJob) Stop(context.Context) error  { close(j.stopped); return nil }
