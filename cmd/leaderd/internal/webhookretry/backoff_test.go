package webhookretry_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/webhookretry"
)

func TestBackoff(t *testing.T) {
	base, maxDelay := 10*time.Second, 5*time.Minute
	for attempts, want := range map[int]time.Duration{1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 5: 160 * time.Second, 6: maxDelay, 100: maxDelay} {
		assert.Equal(t, want/2, webhookretry.Backoff(attempts, base, maxDelay, 0), "attempts %d, r 0", attempts)
		assert.Equal(t, want/2+want/4, webhookretry.Backoff(attempts, base, maxDelay, 0.5), "attempts %d, r 0.5", attempts)
		assert.Less(t, webhookretry.Backoff(attempts, base, maxDelay, 0.999999), want+time.Millisecond)
	}
	huge := time.Duration(1<<62 + 1)
	assert.Equal(t, huge-huge/2, webhookretry.Backoff(1000, time.Second, huge, 0), "no overflow")
}
