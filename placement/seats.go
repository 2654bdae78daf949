package placement

import (
	"strings"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// SeatPrefix starts the lease name of every membership seat of every
// group: a listing of a store's leases shows those as members, not as
// leases.
const SeatPrefix = seatPrefix

// Seat is a member's membership seat as the store holds it.
type Seat struct {
	Group  string    // the group's Config.Name
	Holder string    // the member's holder name
	Since  time.Time // when it joined, by its own wall clock (display only); zero if unknown
}

// ParseSeat returns the seat that the lease l is, and false if l is no
// seat or a free one. Whether its member is still live is for the caller
// to judge, as an elector does: by watching l's version change.
func ParseSeat(l elector.Lease) (Seat, bool) {
	rest, ok := strings.CutPrefix(l.Name, seatPrefix)
	if !ok || l.Holder == "" {
		return Seat{}, false
	}
	group, _, ok := strings.Cut(rest, "/seat/")
	if !ok {
		return Seat{}, false
	}
	holder, since := parseSeatHolder(l.Holder)
	return Seat{Group: group, Holder: holder, Since: since}, true
}

// Validate returns an error naming the first bad value of c, as [New]
// would, or nil.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}
