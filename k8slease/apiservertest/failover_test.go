package apiservertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/clock"
)

// TestFailover runs two electors on two stores (as two pods): when the
// leader resigns, the candidate leads within a watch event, long before its
// RetryInterval or the TTL; when the leader crashes (stops renewing), the
// candidate leads no sooner than a TTL after the last renewal, and soon
// after; tokens grow with each term.
func TestFailover(t *testing.T) {
	ns := newNamespace(t)
	const ttl = 2 * time.Second
	newElector := func(holder string) *elector.LeaseElector {
		e, err := elector.New(newStore(t, ns), "job", elector.Config{Holder: holder, TTL: ttl, RetryInterval: time.Minute})
		require.NoError(t, err)
		return e
	}
	a, b := newElector("a"), newElector("b")
	type won struct {
		term elector.Term
		err  error
		at   time.Time
	}
	campaign := func(e *elector.LeaseElector) <-chan won {
		ch := make(chan won, 1)
		go func() {
			term, err := e.Campaign(testCtx(t))
			ch <- won{term, err, clock.Now()}
		}()
		return ch
	}
	wait := func(ch <-chan won, what string) won {
		t.Helper()
		select {
		case w := <-ch:
			require.NoError(t, w.err, what)
			return w
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: no term within 20s", what)
			return won{}
		}
	}

	termA := wait(campaign(a), "a campaigns").term
	gotB := campaign(b)
	time.Sleep(200 * time.Millisecond) // b is watching
	resigned := clock.Now()
	require.NoError(t, termA.Resign(testCtx(t)))
	wb := wait(gotB, "b after a resigned")
	t.Logf("handoff: b leads %v after a resigned", wb.at.Sub(resigned))
	assert.Less(t, wb.at.Sub(resigned), ttl/2, "a handoff takes a watch event, not a TTL")
	assert.Greater(t, wb.term.Token(), termA.Token())

	gotA := campaign(a)
	time.Sleep(200 * time.Millisecond) // a is watching
	wb.term.Abandon()                  // b crashes: no more renewals, no release
	crashed := clock.Now()
	wa := wait(gotA, "a after b crashed")
	// Written is the writer's wall clock before its write: a watched b's
	// last renewal for a TTL from some moment after it was written.
	last, took := wb.term.Lease().Written, wa.term.Lease().Written
	t.Logf("crash failover: a leads %v after b's last renewal, %v after the crash (TTL %v)", took.Sub(last), wa.at.Sub(crashed), ttl)
	assert.GreaterOrEqual(t, took.Sub(last), ttl-time.Millisecond, "never before a TTL after b's last renewal")
	assert.Less(t, wa.at.Sub(crashed), 3*ttl+5*time.Second)
	assert.Greater(t, wa.term.Token(), wb.term.Token())
	require.NoError(t, wa.term.Resign(context.Background()))
}
