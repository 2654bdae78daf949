package decorator

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff is the exponential, jittered wait between failed attempts. It
// belongs to one gate goroutine.
type backoff struct {
	min, max time.Duration
	cur      time.Duration // 0 after reset
}

// next returns the next wait: cur doubles from min up to max, and the wait is
// drawn from [cur/2, cur], never below min.
func (b *backoff) next() time.Duration {
	switch {
	case b.cur == 0:
		b.cur = b.min
	case b.cur > b.max/2:
		b.cur = b.max
	default:
		b.cur *= 2
	}
	half := b.cur / 2
	return max(half+rand.N(b.cur-half+1), b.min)
}

func (b *backoff) reset() { b.cur = 0 }

// sleep waits for d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
