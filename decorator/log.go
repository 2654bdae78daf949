package decorator

import (
	"context"
	"log/slog"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// Log returns a middleware that logs every Start and Stop of the next job at
// Info: the job's type, the lease name, holder and token of the term the
// context carries (see [elector.LeaseFromContext]), the call's duration and
// its error, if any. The duration is a string such as "4.05µs", with every
// handler (JSON too). A nil l means [slog.Default] at the time the
// middleware is applied.
func Log(l *slog.Logger) Middleware {
	return func(next Job) Job {
		logger := l
		if logger == nil {
			logger = slog.Default()
		}
		return &logJob{next: next, log: logger, name: nameOf(next)}
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
	attrs := append(termAttrs(ctx, j.name), durationAttr("duration", time.Since(begin)))
	if err != nil {
		attrs = append(attrs, slog.Any("err", err))
	}
	j.log.LogAttrs(ctx, slog.LevelInfo, msg, attrs...)
}

// termAttrs returns the attributes that name job and the lease, holder and
// token of the term ctx carries, with room for two more.
func termAttrs(ctx context.Context, job string) []slog.Attr {
	t, _ := elector.TermFromContext(ctx)
	return leaseAttrs(job, t, "", "")
}

// leaseAttrs returns the attributes that name job and the lease, holder and
// token of term t, with room for two more. Without a term, they name lease
// and holder instead, those that are not "".
func leaseAttrs(job string, t elector.Term, lease, holder string) []slog.Attr {
	attrs := make([]slog.Attr, 1, 6)
	attrs[0] = slog.String("job", job)
	if t != nil {
		l := t.Lease()
		return append(attrs, slog.String("lease", l.Name), slog.String("holder", l.Holder), slog.Uint64("token", l.Token))
	}
	if lease != "" {
		attrs = append(attrs, slog.String("lease", lease))
	}
	if holder != "" {
		attrs = append(attrs, slog.String("holder", holder))
	}
	return attrs
}

// logAttrs returns the attributes of a decorated job's log lines: the job,
// and the lease, holder and token of t, or if t is nil, of the term ctx
// carries; without either, the lease name and holder of the elector, if it
// tells them (by methods Name() string and Config() elector.Config).
func (d *decorated) logAttrs(ctx context.Context, t elector.Term) []slog.Attr {
	if t == nil {
		t, _ = elector.TermFromContext(ctx)
	}
	if t != nil {
		return leaseAttrs(d.jobName, t, "", "")
	}
	return leaseAttrs(d.jobName, nil, d.leaseName(), d.holder())
}

// holder is the holder name of the elector, if it tells it (by a method
// Config() elector.Config), else "".
func (d *decorated) holder() string {
	if c, ok := d.elector.(interface{ Config() elector.Config }); ok {
		return c.Config().Holder
	}
	return ""
}

// durationAttr returns the attribute key with the value d as a string such
// as "4.05µs", "12.345ms" or "13.5s": rounded to the microsecond from a
// millisecond up and to the millisecond from a second up. slog.Duration
// prints a duration so with the text handler, but as an integer of
// nanoseconds with the JSON handler; a string reads the same in both.
func durationAttr(key string, d time.Duration) slog.Attr {
	switch a := d.Abs(); {
	case a >= time.Second:
		d = d.Round(time.Millisecond)
	case a >= time.Millisecond:
		d = d.Round(time.Microsecond)
	}
	return slog.String(key, d.String())
}
