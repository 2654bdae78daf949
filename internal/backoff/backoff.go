// Package backoff runs a long-lived call again after it fails, waiting a
// jittered, growing time between runs.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Retry calls run until ctx ends. After each return of run it calls failed
// with run's error and the wait, then waits: a time in [b/2, b], where b
// starts at minWait, doubles after each wait up to maxWait, and starts at
// minWait again after a run that reported progress (such as a watch that
// was established before it failed).
func Retry(ctx context.Context, minWait, maxWait time.Duration,
	run func(context.Context) (progressed bool, err error), failed func(err error, wait time.Duration)) {
	b := minWait
	for {
		progressed, err := run(ctx)
		if ctx.Err() != nil {
			return
		}
		if progressed {
			b = minWait
		}
		wait := b/2 + rand.N(b/2+1)
		failed(err, wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		b = min(2*b, maxWait)
	}
}
