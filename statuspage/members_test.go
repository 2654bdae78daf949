package statuspage_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/placement"
	"github.com/leaderaware/leaderaware/statuspage"
)

// groupSource is a source with a placement group, as *fxmodule.Registry
// is: fixed members, and the holders that wait for each lease.
type groupSource struct {
	source
	members []placement.Member
	waiting map[string][]string
}

func (g *groupSource) Members() []placement.Member   { return g.members }
func (g *groupSource) Waiting(lease string) []string { return g.waiting[lease] }

// TestMembers: with a source that has a placement group, the JSON lists
// its members (snake_case) and, for each lease of its jobs, every member
// that waits for it, this instance with its job; the group's seats are not
// listed as leases; the page has the members' table and no form.
func TestMembers(t *testing.T) {
	since := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	src := &groupSource{source: source{store: elector.NewMemoryStore(), holder: "me"}}
	mine := src.acquire(t, "mine", "me")
	src.acquire(t, "theirs", "other")
	src.acquire(t, placement.SeatPrefix+"g/seat/0", "me@1764637200000")
	src.snaps = []decorator.Snapshot{
		{Job: "*main.A", Lease: "mine", Leading: true, Holder: "me", Token: mine.Token},
		{Job: "*main.B", Lease: "theirs"},
	}
	src.members = []placement.Member{
		{Holder: "me", Since: since, Leases: []string{"mine"}, Self: true},
		{Holder: "other", Since: since, Leases: []string{"theirs"}},
		{Holder: "third", Draining: true},
	}
	src.waiting = map[string][]string{"mine": {"other"}, "theirs": {"me"}}
	h := statuspage.Handler(src)
	raw, st := status(t, h, "/leaders/leases")

	assert.Equal(t, []statuspage.Member{
		{Holder: "me", Since: &since, Leases: []string{"mine"}, Self: true},
		{Holder: "other", Since: &since, Leases: []string{"theirs"}},
		{Holder: "third", Leases: []string{}, Draining: true},
	}, st.Members)
	require.Len(t, st.Leases, 2, "the seat is no lease: %+v", st.Leases)
	assert.Equal(t, []statuspage.Candidate{{Holder: "other"}}, st.Leases[0].Waiting, "who waits for mine")
	assert.Equal(t, []statuspage.Candidate{{Holder: "me", Job: "*main.B"}}, st.Leases[1].Waiting, "who waits for theirs")
	m0 := raw["members"].([]any)[0].(map[string]any)
	for _, k := range []string{"holder", "since", "leases", "self"} {
		assert.Contains(t, m0, k)
	}
	assert.Contains(t, raw["members"].([]any)[2], "draining")

	code, _, page := get(t, h, http.MethodGet, "/leaders/")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, page, `id="members"`)
	assert.NotContains(t, strings.ToLower(page), "<form", "the page only reads")
	code, _, _ = get(t, h, http.MethodPost, "/leaders/leases")
	assert.Equal(t, http.StatusMethodNotAllowed, code)
}
