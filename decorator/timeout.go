package decorator

import (
	"context"
	"fmt"
	"time"
)

// Timeout returns a middleware that bounds the context given to the next
// job's Start by start, and to its Stop by stop. A zero duration leaves that
// context as it is; an earlier deadline already on the context still holds.
// Timeout panics if start or stop is negative.
func Timeout(start, stop time.Duration) Middleware {
	if start < 0 || stop < 0 {
		panic(fmt.Sprintf("decorator.Timeout: negative timeout (start %v, stop %v)", start, stop))
	}
	return func(next Job) Job { return &timeoutJob{next: next, start: start, stop: stop} }
}

type timeoutJob struct {
	next        Job
	start, stop time.Duration
}

func (t *timeoutJob) Start(ctx context.Context) error {
	if t.start > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.start)
		defer cancel()
	}
	return t.next.Start(ctx)
}

func (t *timeoutJob) Stop(ctx context.Context) error {
	if t.stop > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.stop)
		defer cancel()
	}
	return t.next.Stop(ctx)
}

// Unwrap returns the job that t wraps.
func (t *timeoutJob) Unwrap() Job { return t.next }
