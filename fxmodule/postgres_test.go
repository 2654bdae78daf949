package fxmodule_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/fxmodule"
	"github.com/leaderaware/leaderaware/pglease"
	"github.com/leaderaware/leaderaware/placement"
)

// pgApp is an app with Module on PostgreSQL (the leases in schema) and
// inner as testJob, which puts the graph's stores in *pg and *es.
func pgApp(t *testing.T, dsn, schema, holder string, inner *countingJob, pg **pglease.Store, es *elector.Store) *fxtest.App {
	t.Helper()
	cfg := fast
	cfg.Holder = holder
	return fxtestNew(t,
		fxmodule.Module(fxmodule.Config{Store: fxmodule.Postgres(dsn, pglease.WithSchema(schema)), Elector: cfg}),
		fx.Provide(func() testJob { return inner }),
		fxmodule.LeaderJob[testJob]("pg-job"),
		fx.Populate(pg, es),
	)
}

// TestModulePostgres runs two apps with fxmodule.Postgres, in a
// Kubernetes pod (where the default SQLite file would be refused): the
// module opens a *pglease.Store and provides it as the elector.Store,
// exactly one app runs the job and holds its lease in PostgreSQL, the
// other takes over when it stops, the lifecycle closes each store, and no
// SQLite file is created.
func TestModulePostgres(t *testing.T) {
	dsn := pgDSN(t)
	schema := pgSchema(t, dsn)
	inPod(t, true)
	shared := new(counters)
	a, b := newCountingJob(shared), newCountingJob(shared)
	var pgA, pgB *pglease.Store
	var esA, esB elector.Store
	appA := pgApp(t, dsn, schema, "replica-a", a, &pgA, &esA)
	appB := pgApp(t, dsn, schema, "replica-b", b, &pgB, &esB)
	require.NotNil(t, pgA)
	assert.Same(t, pgA, esA, "the elector.Store should be the *pglease.Store")
	assert.Same(t, pgB, esB, "the elector.Store should be the *pglease.Store")

	requireHandoff(t, shared, replica{appA.RequireStart(), a, "replica-a"}, replica{appB.RequireStart(), b, "replica-b"},
		func(leader replica) {
			all, err := pgA.List(t.Context())
			require.NoError(t, err)
			var rows []pglease.LeaseRow
			for _, r := range all {
				if !strings.HasPrefix(r.Name, placement.SeatPrefix) { // the replicas' group seats
					rows = append(rows, r)
				}
			}
			require.Len(t, rows, 1)
			assert.Equal(t, "pg-job", rows[0].Name)
			assert.Equal(t, leader.holder, rows[0].Holder, "the leader should hold the lease in PostgreSQL")
		})
	for _, s := range []*pglease.Store{pgA, pgB} {
		_, err := s.Get(context.Background(), "pg-job")
		assert.ErrorIs(t, err, pglease.ErrClosed, "the app's stop should close its store")
	}
	assertNoFile(t, fxmodule.DefaultSQLitePath)
}

// TestModulePostgresRefuses: a store that cannot open is an error from
// fx.New naming the server, and nothing runs.
func TestModulePostgresRefuses(t *testing.T) {
	t.Chdir(t.TempDir())
	inner := newCountingJob(nil)
	app := fx.New(quiet,
		fxmodule.Module(fxmodule.Config{Store: fxmodule.Postgres("postgres://app:secret@127.0.0.1:1/app?connect_timeout=2")}),
		fx.Provide(func() testJob { return inner }),
		fxmodule.LeaderJob[testJob]("job"),
	)
	require.Error(t, app.Err())
	assert.ErrorContains(t, app.Err(), "fxmodule: lease store: pglease")
	assert.ErrorContains(t, app.Err(), "127.0.0.1")
	assert.NotContains(t, app.Err().Error(), "secret", "the error must not show the password")
	assert.Zero(t, inner.starts.Load())
	assertNoFile(t, fxmodule.DefaultSQLitePath)
}
