package statuspage

import (
	"strings"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/placement"
)

// group is a Source with a placement group, as *fxmodule.Registry is.
type group interface {
	Members() []placement.Member
	Waiting(lease string) []string
}

// membersJSON returns ms as JSON.
func membersJSON(ms []placement.Member) []Member {
	out := make([]Member, len(ms))
	for i, m := range ms {
		out[i] = Member{Holder: m.Holder, Leases: m.Leases, Self: m.Self, Draining: m.Draining}
		if out[i].Leases == nil {
			out[i].Leases = []string{}
		}
		if !m.Since.IsZero() {
			since := m.Since
			out[i].Since = &since
		}
	}
	return out
}

// waitingJSON returns the holders that wait for a lease as candidates,
// this instance (holder) with its job.
func waitingJSON(holders []string, job, holder string) []Candidate {
	var out []Candidate
	for _, h := range holders {
		c := Candidate{Holder: h}
		if h == holder {
			c.Job = job
		}
		out = append(out, c)
	}
	return out
}

// Members returns ms as the page's JSON lists them.
func Members(ms []placement.Member) []Member { return membersJSON(ms) }

// withoutSeats returns leases without the membership seats of placement
// groups, which the page shows as members.
func withoutSeats(leases []elector.Lease) []elector.Lease {
	out := leases[:0:0]
	for _, l := range leases {
		if !strings.HasPrefix(l.Name, placement.SeatPrefix) {
			out = append(out, l)
		}
	}
	return out
}
