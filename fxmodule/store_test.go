package fxmodule_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/fxmodule"
	"github.com/leaderaware/leaderaware/pglease"
)

// TestModuleRefusesEmptyStore: a store chosen in Config.Store and given an
// empty path or DSN (the README's os.Getenv("DATABASE_URL") with the
// variable unset) is an error from fx.New naming the field and the value,
// never the SQLite default: nothing is opened, and no file is created.
func TestModuleRefusesEmptyStore(t *testing.T) {
	for name, tc := range map[string]struct {
		store fxmodule.StoreConfig
		want  string
	}{
		"postgres, unset variable": {fxmodule.Postgres(os.Getenv("LEADERAWARE_TEST_UNSET")), `Config.Store: fxmodule.Postgres(""): the DSN is empty (an unset environment variable?)`},
		"postgres, blank":          {fxmodule.Postgres(" \n", pglease.WithSchema("app")), `Config.Store: fxmodule.Postgres(" \n"): the DSN is empty`},
		"sqlite, unset variable":   {fxmodule.SQLite(os.Getenv("LEADERAWARE_TEST_UNSET")), `Config.Store: fxmodule.SQLite(""): the path of the lease file is empty`},
	} {
		t.Run(name, func(t *testing.T) {
			inPod(t, false)
			refused(t, []string{"fxmodule.Module", tc.want, "such as"}, func(string, *atomic.Int64) fx.Option {
				return fxmodule.Module(fxmodule.Config{Store: tc.store, Elector: fast})
			}, provide[testJob](newCountingJob(nil)), leaderJob[testJob]("job"))
			assertNoFile(t, fxmodule.DefaultSQLitePath)
		})
	}
}

// TestModuleLogsStore: Module logs at Info which store it opened, and
// whether it is the default.
func TestModuleLogsStore(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })

	dir := inPod(t, false)
	dir, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	for _, tc := range []struct {
		store fxmodule.StoreConfig
		want  string
	}{
		{fxmodule.StoreConfig{}, `level=INFO msg="fxmodule: opened the lease store" store=sqlite path=` + filepath.Join(dir, fxmodule.DefaultSQLitePath) + ` default="Config.Store is unset"`},
		{fxmodule.SQLite("app.db"), `level=INFO msg="fxmodule: opened the lease store" store=sqlite path=` + filepath.Join(dir, "app.db") + "\n"},
	} {
		buf.Reset()
		app := fxtestNew(t, fxmodule.Module(fxmodule.Config{Store: tc.store, Elector: fast}),
			fx.Provide(func() testJob { return newCountingJob(nil) }), fxmodule.LeaderJob[testJob]("job"))
		app.RequireStart().RequireStop()
		assert.Contains(t, buf.String(), tc.want)
	}

	t.Run("postgres", func(t *testing.T) {
		dsn := pgDSN(t)
		schema := pgSchema(t, dsn)
		buf.Reset()
		app := fxtestNew(t, fxmodule.Module(fxmodule.Config{Store: fxmodule.Postgres(dsn, pglease.WithSchema(schema)), Elector: fast}),
			fx.Provide(func() testJob { return newCountingJob(nil) }), fxmodule.LeaderJob[testJob]("job"))
		app.RequireStart().RequireStop()
		assert.Regexp(t, `level=INFO msg="fxmodule: opened the lease store" store=postgres host=\S+ port=\d+ database=\S+ user=\S* table=\S*`+schema, buf.String())
		assert.NotContains(t, buf.String(), "password")
	})
}
