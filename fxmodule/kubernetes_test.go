package fxmodule_test

import (
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

// inPod makes the test process look like a Kubernetes pod (set, the
// variable is what every pod has; empty, what a process outside one has)
// and moves it to a fresh working directory, where the default lease file
// would be created. It returns that directory.
func inPod(t *testing.T, kubernetes bool) string {
	t.Helper()
	host := ""
	if kubernetes {
		host = "10.96.0.1"
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", host)
	dir := t.TempDir()
	t.Chdir(dir)
	return dir
}

// TestModuleRefusesDefaultPathInKubernetes: in a pod, the default SQLite
// file would be the pod's own, so every replica would lead every job.
// fx.New fails with an error that says so and names the fixes, and the
// file is not created: with Config.Store unset, and with the default file
// spelled out, however it is spelled.
func TestModuleRefusesDefaultPathInKubernetes(t *testing.T) {
	dir := inPod(t, true)
	require.NoError(t, os.Mkdir("sub", 0o755))
	require.NoError(t, os.Symlink(dir, "link"))
	real, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	for name, store := range map[string]fxmodule.StoreConfig{
		"unset":     {},
		"as is":     fxmodule.SQLite(fxmodule.DefaultSQLitePath),
		"dot slash": fxmodule.SQLite("./" + fxmodule.DefaultSQLitePath),
		"absolute":  fxmodule.SQLite(filepath.Join(dir, fxmodule.DefaultSQLitePath)),
		"dot dot":   fxmodule.SQLite("sub/../" + fxmodule.DefaultSQLitePath),
		"symlink":   fxmodule.SQLite(filepath.Join(dir, "link", fxmodule.DefaultSQLitePath)),
	} {
		t.Run(name, func(t *testing.T) {
			inner := newCountingJob(nil)
			app := fx.New(quiet,
				fxmodule.Module(fxmodule.Config{Store: store, Elector: fast}),
				fx.Provide(func() testJob { return inner }),
				fxmodule.LeaderJob[testJob]("job"),
			)
			err := app.Err()
			require.Error(t, err)
			for _, want := range []string{
				"KUBERNETES_SERVICE_HOST", "default SQLite lease file", filepath.Join(real, fxmodule.DefaultSQLitePath), // what was seen
				"own file", "every pod would lead", // why it is wrong
				"Kubernetes Lease objects", "k8slease.New", // the first fix
				"PostgreSQL", "fxmodule.Postgres", "fxmodule.WithStore", "fxmodule.SQLite", "volume", // the others
			} {
				assert.ErrorContains(t, err, want)
			}
			assertNoFile(t, fxmodule.DefaultSQLitePath)
			assert.Zero(t, inner.starts.Load())
		})
	}

	_, err = fxmodule.NewSQLiteStore(nil, "./"+fxmodule.DefaultSQLitePath)
	assert.ErrorContains(t, err, "KUBERNETES_SERVICE_HOST", "the constructor behind Module refuses too")
	assertNoFile(t, fxmodule.DefaultSQLitePath)
}

// TestModuleDefaultPathAllowed: in Kubernetes, another SQLite file and
// WithStore run the job; outside Kubernetes, so does the default file.
func TestModuleDefaultPathAllowed(t *testing.T) {
	for name, tc := range map[string]struct {
		kubernetes bool
		cfg        fxmodule.Config
		opts       []fx.Option
		file       string // the lease file that must exist afterwards; "" for none
	}{
		"kubernetes, another file":      {kubernetes: true, cfg: fxmodule.Config{Store: fxmodule.SQLite("shared.db")}, file: "shared.db"},
		"kubernetes, WithStore":         {kubernetes: true, opts: []fx.Option{fxmodule.WithStore(elector.NewMemoryStore())}},
		"not kubernetes, default":       {file: fxmodule.DefaultSQLitePath},
		"not kubernetes, spelled out":   {cfg: fxmodule.Config{Store: fxmodule.SQLite("./" + fxmodule.DefaultSQLitePath)}, file: fxmodule.DefaultSQLitePath},
		"kubernetes, default elsewhere": {kubernetes: true, cfg: fxmodule.Config{Store: fxmodule.SQLite("sub/" + fxmodule.DefaultSQLitePath)}, file: "sub/" + fxmodule.DefaultSQLitePath},
	} {
		t.Run(name, func(t *testing.T) {
			inPod(t, tc.kubernetes)
			require.NoError(t, os.Mkdir("sub", 0o755))
			inner := newCountingJob(nil)
			tc.cfg.Elector = fast
			app := fxtestNew(t, append([]fx.Option{
				fxmodule.Module(tc.cfg),
				fx.Provide(func() testJob { return inner }),
				fxmodule.LeaderJob[testJob]("job"),
			}, tc.opts...)...)
			app.RequireStart()
			require.Eventually(t, inner.running.Load, 5*time.Second, 5*time.Millisecond)
			app.RequireStop()
			if tc.file != "" {
				assert.FileExists(t, tc.file)
			} else {
				assertNoFile(t, fxmodule.DefaultSQLitePath)
			}
		})
	}
}
