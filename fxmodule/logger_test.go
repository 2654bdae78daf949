package fxmodule_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/fxmodule"
	"github.com/leaderaware/leaderaware/internal/testing/logbuf"
	"github.com/leaderaware/leaderaware/pglease"
)

// messages returns the msg of each record but the placement group's (see
// placementLines).
func messages(recs []map[string]any) []string {
	var msgs []string
	for _, r := range withoutPlacement(recs) {
		msg, _ := r["msg"].(string)
		msgs = append(msgs, msg)
	}
	return msgs
}

// withoutPlacement returns recs without the lines of the app's placement
// group.
func withoutPlacement(recs []map[string]any) []map[string]any {
	return slices.DeleteFunc(slices.Clone(recs), func(r map[string]any) bool {
		msg, _ := r["msg"].(string)
		return strings.HasPrefix(msg, "placement: ")
	})
}

// placementLines are the Info lines the placement group of an app with one
// LeaderJob writes when it joins, and, at the app's stop, drains and
// leaves; they interleave with the job's, and Debug lines may come too.
var placementLines = []string{"placement: joined group", "placement: draining", "placement: left group", "placement: drained"}

// assertPlacementLines asserts that recs has placementLines, among others
// of the group's.
func assertPlacementLines(t *testing.T, recs []map[string]any) {
	t.Helper()
	var got []string
	for _, r := range recs {
		if msg, _ := r["msg"].(string); strings.HasPrefix(msg, "placement: ") {
			got = append(got, msg)
		}
	}
	assert.Subset(t, got, placementLines, "the placement group's lines")
}

// runLogged starts and stops an app with Module (cfg, and opts) and a
// LeaderJob "logged" on a MemoryStore, once its job has been elected.
func runLogged(t *testing.T, cfg fxmodule.Config, opts ...fx.Option) {
	t.Helper()
	inner := newCountingJob(nil)
	app := fxtestNew(t, append([]fx.Option{
		fxmodule.Module(cfg),
		fxmodule.WithStore(elector.NewMemoryStore()),
		fx.Provide(func() testJob { return inner }),
		fxmodule.LeaderJob[testJob]("logged"),
	}, opts...)...)
	app.RequireStart()
	require.Eventually(t, inner.running.Load, 5*time.Second, time.Millisecond, "the job should be elected")
	app.RequireStop()
}

// TestModuleLogsToTheAppLogger: an app that provides its own *slog.Logger
// gets every line of the library in that logger's handler, and none in
// slog.Default: the elected and demoted lines of its LeaderJob, each a JSON
// object whose time (the handler's) has sub-second resolution, and whose
// message carries no time of the library's own.
func TestModuleLogsToTheAppLogger(t *testing.T) {
	def := logbuf.CaptureDefault(t)
	l, b := logbuf.JSONLogger()
	before := time.Now()
	runLogged(t, fxmodule.Config{Elector: fast}, fx.Supply(l))
	after := time.Now()

	recs := b.Records(t)
	assert.Equal(t, []string{"elected", "demoted"}, messages(recs))
	assertPlacementLines(t, recs)
	for _, r := range withoutPlacement(recs) {
		assert.Equal(t, "logged", r["lease"])
		ts, err := time.Parse(time.RFC3339Nano, r["time"].(string))
		require.NoError(t, err)
		assert.False(t, ts.Before(before.Truncate(time.Millisecond)) || ts.After(after), "time %v outside [%v, %v]", ts, before, after)
		assert.NotEqual(t, ts.Truncate(time.Second), ts, "the time has a sub-second part: %v", r["time"])
	}
	assert.Empty(t, def.Records(t), "nothing goes to slog.Default")
}

// TestModuleLoggerPrecedence: Config.Logger wins over the graph's
// *slog.Logger, and without either the lines go to slog.Default.
func TestModuleLoggerPrecedence(t *testing.T) {
	t.Run("Config.Logger", func(t *testing.T) {
		def := logbuf.CaptureDefault(t)
		graph, gb := logbuf.JSONLogger()
		configured, cb := logbuf.JSONLogger()
		runLogged(t, fxmodule.Config{Elector: fast, Logger: configured}, fx.Supply(graph))
		assert.Equal(t, []string{"elected", "demoted"}, messages(cb.Records(t)))
		assertPlacementLines(t, cb.Records(t))
		assert.Empty(t, gb.Records(t))
		assert.Empty(t, def.Records(t))
	})
	t.Run("slog.Default", func(t *testing.T) {
		def := logbuf.CaptureDefault(t)
		runLogged(t, fxmodule.Config{Elector: fast})
		assert.Equal(t, []string{"elected", "demoted"}, messages(def.Records(t)))
		assertPlacementLines(t, def.Records(t))
	})
}

// TestModuleLogsStoreToTheAppLogger: the store's own lines (sqlitelease's
// and pglease's) and the line that says which store Module opened go to
// the app's logger too, and none to slog.Default.
func TestModuleLogsStoreToTheAppLogger(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) {
		path := dbPath(t)
		recs := runStoreLogged(t, fxmodule.SQLite(path))
		require.Equal(t, []string{"sqlitelease: opened the lease store", "fxmodule: opened the lease store", "elected", "demoted"}, messages(recs))
		assertPlacementLines(t, recs)
		assert.Equal(t, path, recs[0]["path"])
		assert.Equal(t, "sqlite", recs[1]["store"])
	})
	t.Run("Postgres", func(t *testing.T) {
		dsn := pgDSN(t)
		recs := runStoreLogged(t, fxmodule.Postgres(dsn, pglease.WithSchema(pgSchema(t, dsn))))
		// pglease's listener logs when it connects, at a time of its own.
		recs = slices.DeleteFunc(recs, func(r map[string]any) bool { return r["msg"] == "pglease: release listener connected" })
		require.Equal(t, []string{"fxmodule: opened the lease store", "elected", "demoted"}, messages(recs))
		assert.Equal(t, "postgres", recs[0]["store"])
	})
}

// runStoreLogged runs an app with Module on store and a LeaderJob "logged"
// until its job has been elected, with a *slog.Logger in the graph, and
// returns what that logger got; it asserts that slog.Default got nothing.
func runStoreLogged(t *testing.T, store fxmodule.StoreConfig) []map[string]any {
	t.Helper()
	def := logbuf.CaptureDefault(t)
	l, b := logbuf.JSONLogger()
	inner := newCountingJob(nil)
	app := fxtestNew(t,
		fx.Supply(l),
		fxmodule.Module(fxmodule.Config{Store: store, Elector: fast}),
		fx.Provide(func() testJob { return inner }),
		fxmodule.LeaderJob[testJob]("logged"),
	)
	app.RequireStart()
	require.Eventually(t, inner.running.Load, 5*time.Second, time.Millisecond, "the job should be elected")
	app.RequireStop()
	assert.Empty(t, def.Records(t), "nothing goes to slog.Default")
	return b.Records(t)
}
