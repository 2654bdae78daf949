package jobs_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/leaderaware/leaderaware/decorator"
)

// recorder records when a job's function ran, counted from when the
// recorder was made, and the errors an error handler got.
type recorder struct {
	t0   time.Time
	mu   sync.Mutex
	at   []time.Duration
	errs []error
}

func newRecorder() *recorder { return &recorder{t0: time.Now()} }

// run records a run; it is a job's function.
func (r *recorder) run(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at = append(r.at, time.Since(r.t0))
	return nil
}

// handle records err; it is an error handler.
func (r *recorder) handle(_ context.Context, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *recorder) runs() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.at...)
}

func (r *recorder) errors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// checkRestarts starts and stops j 20 times in a synctest bubble, calling
// between each Start and Stop, and checks that the job runs exactly one
// goroutine, in fn (such as "jobs.(*EveryJob).loop"), while started, and
// none after Stop. Only goroutines that the test started count, unlike
// runtime.NumGoroutine, which counts every goroutine of the process.
func checkRestarts(t *testing.T, j decorator.Job, fn string, between func()) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	for i := range 20 {
		require.NoError(t, j.Start(t.Context()), "cycle %d", i)
		synctest.Wait()
		require.Equal(t, 1, goroutinesIn(fn), "cycle %d: goroutines in %s", i, fn)
		require.NoError(t, goleak.Find(before, goleak.IgnoreAnyFunction("github.com/leaderaware/leaderaware/"+fn)),
			"cycle %d: a goroutine besides the job's", i)
		between()
		require.NoError(t, j.Stop(t.Context()), "cycle %d", i)
		synctest.Wait()
		require.NoError(t, goleak.Find(before), "cycle %d: a goroutine left after Stop", i)
	}
}

// goroutinesIn counts the goroutines whose stack has a frame of fn. A
// stopped job's goroutine has left its function by the time Stop returns,
// so only the running job's goroutines count.
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), fn+"(")
}

// captureDefaultLog sends slog.Default to a buffer until the returned
// function is called, which restores it and returns what was logged.
func captureDefaultLog(t *testing.T) func() string {
	t.Helper()
	prev := slog.Default()
	var mu sync.Mutex
	var buf bytes.Buffer
	slog.SetDefault(slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil)))
	restored := false
	restore := func() string {
		if !restored {
			slog.SetDefault(prev)
			restored = true
		}
		mu.Lock()
		defer mu.Unlock()
		return buf.String()
	}
	t.Cleanup(func() { restore() })
	return restore
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}
