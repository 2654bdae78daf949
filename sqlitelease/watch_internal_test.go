package sqlitelease

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestWatchDue: the poller reads although the file did not change once the
// shortest every of its WatchLease subscribers has passed, while a lease
// is not read yet, or when a read was set aside; WatchRelease subscribers
// alone ask for no such reads.
func TestWatchDue(t *testing.T) {
	var w watchState
	w.init(nil, 20*time.Millisecond)
	assert.False(t, w.due(time.Hour), "no WatchLease subscriber")

	w.everies[time.Second]++
	w.everies[3*time.Second]++
	assert.False(t, w.due(999*time.Millisecond))
	assert.True(t, w.due(time.Second))

	w.unread = 1
	assert.True(t, w.due(0), "a lease not read yet")
	w.unread = 0
	w.reread = true
	assert.True(t, w.due(0), "a read set aside")
}
