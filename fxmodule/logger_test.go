package fxmodule_test

import (
	"encoding/json"
	"log/slog"
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

// logBuffer keeps what a handler wrote.
type logBuffer struct{ logbuf.Buffer }

// records parses every line written as a JSON object.
func (b *logBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for line := range strings.Lines(b.String()) {
		var rec map[string]any
		require.NoErrorf(t, json.Unmarshal([]byte(line), &rec), "line %q", line)
		recs = append(recs, rec)
	}
	return recs
}

// jsonLogger returns a logger with a JSON handler at Debug writing to a new
// logBuffer.
func jsonLogger() (*slog.Logger, *logBuffer) {
	b := new(logBuffer)
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// captureDefault makes slog.Default write JSON to a logBuffer until t ends.
func captureDefault(t *testing.T) *logBuffer {
	l, b := jsonLogger()
	old := slog.Default()
	slog.SetDefault(l)
	t.Cleanup(func() { slog.SetDefault(old) })
	return b
}

// messages returns the msg of each record.
func messages(recs []map[string]any) []string {
	msgs := make([]string, len(recs))
	for i, r := range recs {
		msgs[i], _ = r["msg"].(string)
	}
	return msgs
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
	def := captureDefault(t)
	l, b := jsonLogger()
	before := time.Now()
	runLogged(t, fxmodule.Config{Elector: fast}, fx.Supply(l))
	after := time.Now()

	recs := b.records(t)
	assert.Equal(t, []string{"elected", "demoted"}, messages(recs))
	for _, r := range recs {
		assert.Equal(t, "logged", r["lease"])
		ts, err := time.Parse(time.RFC3339Nano, r["time"].(string))
		require.NoError(t, err)
		assert.False(t, ts.Before(before.Truncate(time.Millisecond)) || ts.After(after), "time %v outside [%v, %v]", ts, before, after)
		assert.NotEqual(t, ts.Truncate(time.Second), ts, "the time has a sub-second part: %v", r["time"])
	}
	assert.Empty(t, def.records(t), "nothing goes to slog.Default")
}

// TestModuleLoggerPrecedence: Config.Logger wins over the graph's
// *slog.Logger, and without either the lines go to slog.Default.
func TestModuleLoggerPrecedence(t *testing.T) {
	t.Run("Config.Logger", func(t *testing.T) {
		def := captureDefault(t)
		graph, gb := jsonLogger()
		configured, cb := jsonLogger()
		runLogged(t, fxmodule.Config{Elector: fast, Logger: configured}, fx.Supply(graph))
		assert.Equal(t, []string{"elected", "demoted"}, messages(cb.records(t)))
		assert.Empty(t, gb.records(t))
		assert.Empty(t, def.records(t))
	})
	t.Run("slog.Default", func(t *testing.T) {
		def := captureDefault(t)
		runLogged(t, fxmodule.Config{Elector: fast})
		assert.Equal(t, []string{"elected", "demoted"}, messages(def.records(t)))
	})
}

// TestModuleLogsPostgresToTheAppLogger: with PostgreSQL, the line that says
// which store Module opened goes to the app's logger too.
func TestModuleLogsPostgresToTheAppLogger(t *testing.T) {
	dsn := pgDSN(t)
	schema := pgSchema(t, dsn)
	def := captureDefault(t)
	l, b := jsonLogger()
	inner := newCountingJob(nil)
	app := fxtestNew(t,
		fx.Supply(l),
		fxmodule.Module(fxmodule.Config{Store: fxmodule.Postgres(dsn, pglease.WithSchema(schema)), Elector: fast}),
		fx.Provide(func() testJob { return inner }),
		fxmodule.LeaderJob[testJob]("logged"),
	)
	app.RequireStart()
	require.Eventually(t, inner.running.Load, 5*time.Second, time.Millisecond, "the job should be elected")
	app.RequireStop()
	recs := b.records(t)
	require.Equal(t, []string{"fxmodule: opened the lease store", "elected", "demoted"}, messages(recs))
	assert.Equal(t, "postgres", recs[0]["store"])
	assert.Empty(t, def.records(t), "nothing goes to slog.Default")
}
