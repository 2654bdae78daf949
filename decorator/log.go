package decorator

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// Log returns a middleware that logs every Start and Stop of the next job at
// Info: the job's type, the lease name, holder and token of the term the
// context carries (see [elector.LeaseFromContext]), the call's duration and
// its error, if any. A nil l means [slog.Default] at the time the middleware
// is applied.
func Log(l *slog.Logger) Middleware {
	return func(next Job) Job {
		logger := l
		if logger == nil {
			logger = slog.Default()
		}
		return &logJob{next: next, log: logger, name: fmt.Sprintf("%T", next)}
	}
}

type logJob struct {
	next Job
	log  *slog.Logger
	name string
}

func (j *logJob) Start(ctx context.Context) error {
	begin := time.Now()
	err := j.next.Start(ctx)
	j.record(ctx, "job Start", begin, err)
	return err
}

func (j *logJob) Stop(ctx context.Context) error {
	begin := time.Now()
	err := j.next.Stop(ctx)
	j.record(ctx, "job Stop", begin, err)
	return err
}

// Unwrap returns the job that j wraps.
func (j *logJob) Unwrap() Job { return j.next }

func (j *logJob) record(ctx context.Context, msg string, begin time.Time, err error) {
	if !j.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := append(termAttrs(ctx, j.name), slog.Duration("duration", time.Since(begin)))
	if err != nil {
		attrs = append(attrs, slog.Any("err", err))
	}
	j.log.LogAttrs(ctx, slog.LevelInfo, msg, attrs...)
}

// termAttrs returns the attributes that name job and the lease, holder and
// token of the term ctx carries, with room for two more.
func termAttrs(ctx context.Context, job string) []slog.Attr {
	attrs := make([]slog.Attr, 1, 6)
	attrs[0] = slog.String("job", job)
	if l, ok := elector.LeaseFromContext(ctx); ok {
		attrs = append(attrs, slog.String("lease", l.Name), slog.String("holder", l.Holder), slog.Uint64("token", l.Token))
	}
	return attrs
}
