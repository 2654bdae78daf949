package statuspage

import (
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// Apply applies the result of read number read of h to h.
func Apply(h any, read uint64, leases []elector.Lease, now time.Time) {
	h.(*handler).apply(read, leases, now)
}
