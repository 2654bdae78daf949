package decorator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

// textLogger returns a logger that writes to buf with the text handler at
// level, without the time.
func textLogger(buf *syncBuffer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// lines returns the lines of s.
func lines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

// TestLogTransitions: a decorated job logs each election at Info, each
// demotion at Info if resigned and at Warn otherwise (with the cause, its
// error and how long the term was held) and each error at Error (without an
// OnError hook), every line with the lease, holder and token, and the
// durations readable.
func TestLogTransitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		var buf syncBuffer
		job := &fakeJob{}
		job.startFn = func(context.Context) error {
			if job.starts.Load() == 1 {
				return errors.New("no config")
			}
			return nil
		}
		lost := fmt.Errorf("renew: %w", elector.ErrLeaseLost)
		d := decorator.Decorate[decorator.Job](job, newElector(t, store, "a"),
			decorator.WithLogger(textLogger(&buf, slog.LevelDebug)),
			decorator.WithBackoff(time.Second, time.Second),
			decorator.WithHooks(decorator.Hooks{OnDemoted: func(context.Context, elector.Term, error) {
				store.failRenew.Store(nil) // let the next term live
			}}))
		require.NoError(t, d.Start(ctx))
		synctest.Wait()
		// Term 1 failed to start; after the backoff of 1s, term 2 starts.
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		require.True(t, job.running())
		store.failRenew.Store(&lost) // term 2 is lost at its renewal at 3s
		time.Sleep(time.Second)
		synctest.Wait()
		require.True(t, job.running(), "term 3 runs the job again")
		time.Sleep(1500 * time.Millisecond)
		require.NoError(t, d.Stop(ctx))

		const head = `job=*decorator_test.fakeJob lease=job holder=a `
		want := []string{
			`level=INFO msg=elected ` + head + `token=1 trust=2.7s`,
			`level=ERROR msg="leader job error" ` + head + `token=1 err="decorator: start *decorator_test.fakeJob: no config"`,
			`level=WARN msg=demoted ` + head + `token=1 cause=start_failed held=0s err="decorator: start *decorator_test.fakeJob: no config"`,
			`level=INFO msg=elected ` + head + `token=2 trust=2.7s`,
			`level=WARN msg=demoted ` + head + `token=2 cause=lost held=2s err="renew: lease lost"`,
			`level=INFO msg=elected ` + head + `token=3 trust=2.7s`,
			`level=INFO msg=demoted ` + head + `token=3 cause=resigned held=2s`,
		}
		require.Equal(t, want, lines(buf.String()))
	})
}

// TestLogCampaignError: an error without a term (a failed campaign) names
// the lease and holder of the elector.
func TestLogCampaignError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newCountingStore()
		store.failAcquires.Store(1)
		var buf syncBuffer
		d := decorator.Decorate[decorator.Job](&fakeJob{}, newElector(t, store, "a"),
			decorator.WithLogger(textLogger(&buf, slog.LevelError)))
		require.NoError(t, d.Start(ctx))
		synctest.Wait()
		require.NoError(t, d.Stop(ctx))
		require.Equal(t, []string{
			`level=ERROR msg="leader job error" job=*decorator_test.fakeJob lease=job holder=a ` +
				`err="decorator: campaign for *decorator_test.fakeJob: elector: campaign for lease \"job\": store is down"`,
		}, lines(buf.String()))
	})
}

// TestLogLevels: at Warn, only demotions that were not resignations and
// errors are logged; with an OnError hook, errors go to it instead of the
// log.
func TestLogLevels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var buf syncBuffer
		e := &fakeElector{}
		var reported []error
		d := decorator.Decorate[decorator.Job](&fakeJob{}, e,
			decorator.WithLogger(textLogger(&buf, slog.LevelWarn)),
			decorator.WithHooks(decorator.Hooks{OnError: func(_ context.Context, err error) { reported = append(reported, err) }}))
		require.NoError(t, d.Start(ctx))
		synctest.Wait()
		e.allTerms()[0].end(elector.ErrLeaseExpired) // term 1 expires; term 2 follows at once
		synctest.Wait()
		require.NoError(t, d.Stop(ctx)) // term 2 is resigned: not at Warn
		require.Len(t, e.allTerms(), 2)
		assert.Empty(t, reported)
		require.Equal(t, []string{
			`level=WARN msg=demoted job=*decorator_test.fakeJob lease=job holder=fake token=1 cause=expired held=0s err="lease expired before it could be renewed"`,
		}, lines(buf.String()))
	})
}

// TestLogDurationsAreStrings: with the JSON handler, every duration the
// decorated job and the Log middleware log is a string such as "1.5s",
// never a number of nanoseconds; the token is the only number.
func TestLogDurationsAreStrings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var buf syncBuffer
		logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		// The inner Start takes 1.234567ms (of the bubble's clock, while the
		// test's goroutine waits).
		job := &fakeJob{startFn: func(context.Context) error { time.Sleep(1234567 * time.Nanosecond); return nil }}
		d := decorator.Decorate[decorator.Job](job, newElector(t, newCountingStore(), "a"),
			decorator.WithLogger(logger),
			decorator.WithMiddleware(decorator.Log(logger)))
		require.NoError(t, d.Start(ctx))
		synctest.Wait()
		time.Sleep(90 * time.Second)
		require.NoError(t, d.Stop(ctx))

		durations := map[string]string{}
		for _, line := range lines(buf.String()) {
			var rec map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
			for k, v := range rec {
				if k == "token" {
					assert.IsType(t, float64(0), v, line)
					continue
				}
				assert.IsType(t, "", v, "%s: %s is not a string", line, k)
			}
			for _, k := range []string{"duration", "held", "trust"} {
				if v, ok := rec[k].(string); ok {
					_, err := time.ParseDuration(v)
					assert.NoError(t, err, line)
					durations[rec["msg"].(string)+" "+k] = v
				}
			}
		}
		assert.Equal(t, map[string]string{
			"elected trust":      "2.7s",
			"job Start duration": "1.235ms",
			"job Stop duration":  "0s",
			"demoted held":       "1m30s",
		}, durations)
	})
}
