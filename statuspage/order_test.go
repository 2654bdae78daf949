package statuspage_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/statuspage"
)

// TestLateRead: a read that returns after a later one does not count, so
// an old state is never recorded as a handoff back.
func TestLateRead(t *testing.T) {
	h := statuspage.Handler(&lister{})
	now := time.Now()
	statuspage.Apply(h, 1, []elector.Lease{{Name: "x", Holder: "a", Token: 1}}, now)
	statuspage.Apply(h, 3, []elector.Lease{{Name: "x", Holder: "b", Token: 2}}, now)
	statuspage.Apply(h, 2, []elector.Lease{{Name: "x", Holder: "a", Token: 1}}, now)
	_, st := status(t, h, "/leases") // read 1 of the handler's own: none listed
	require.Len(t, st.Handoffs, 1, "%+v", st.Handoffs)
	assert.True(t, st.Handoffs[0].At.Equal(now))
	assert.Equal(t, statuspage.Handoff{At: st.Handoffs[0].At, After: st.Handoffs[0].After, Lease: "x", From: "a", FromToken: 1, To: "b", ToToken: 2}, st.Handoffs[0])
}
