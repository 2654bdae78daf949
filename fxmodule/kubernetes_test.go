package fxmodule_test

import (
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
// would be created.
func inPod(t *testing.T, kubernetes bool) {
	t.Helper()
	host := ""
	if kubernetes {
		host = "10.96.0.1"
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", host)
	t.Chdir(t.TempDir())
}

// TestModuleRefusesDefaultPathInKubernetes: in a pod, the default SQLite
// file would be the pod's own, so every replica would lead every job.
// fx.New fails with an error that says so and names both fixes, and the
// file is not created.
func TestModuleRefusesDefaultPathInKubernetes(t *testing.T) {
	inPod(t, true)
	inner := newCountingJob(nil)
	app := fx.New(quiet,
		fxmodule.Module(fxmodule.Config{Elector: fast}),
		fx.Provide(func() testJob { return inner }),
		fxmodule.LeaderJob[testJob]("job"),
	)
	err := app.Err()
	require.Error(t, err)
	for _, want := range []string{
		"KUBERNETES_SERVICE_HOST", `"` + fxmodule.DefaultSQLitePath + `"`, // what was seen
		"own file", "every pod would lead", // why it is wrong
		"PostgreSQL", "Config.PostgresDSN", "fxmodule.WithStore", "Config.SQLitePath", "volume", // the fixes
	} {
		assert.ErrorContains(t, err, want)
	}
	assertNoFile(t, fxmodule.DefaultSQLitePath)
	assert.Zero(t, inner.starts.Load())

	_, err = fxmodule.NewSQLiteStore(nil, fxmodule.Config{})
	assert.ErrorContains(t, err, "KUBERNETES_SERVICE_HOST", "the constructor behind Module refuses too")
	assertNoFile(t, fxmodule.DefaultSQLitePath)
}

// TestModuleDefaultPathAllowed: in Kubernetes, an explicit SQLitePath and
// WithStore run the job; outside Kubernetes, so does the default path.
func TestModuleDefaultPathAllowed(t *testing.T) {
	for name, tc := range map[string]struct {
		kubernetes bool
		cfg        fxmodule.Config
		opts       []fx.Option
		file       string // the lease file that must exist afterwards; "" for none
	}{
		"kubernetes, explicit path": {kubernetes: true, cfg: fxmodule.Config{SQLitePath: "shared.db"}, file: "shared.db"},
		"kubernetes, WithStore":     {kubernetes: true, opts: []fx.Option{fxmodule.WithStore(elector.NewMemoryStore())}},
		"not kubernetes, default":   {file: fxmodule.DefaultSQLitePath},
	} {
		t.Run(name, func(t *testing.T) {
			inPod(t, tc.kubernetes)
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
