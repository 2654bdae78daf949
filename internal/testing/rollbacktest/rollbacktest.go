// Package rollbacktest holds the stores' tests of lease rows that go back
// to an older state under running replicas, as a failover to a standby
// that lagged or a restore of a backup does: versions never repeat, no
// second leader while the holder lives, and a dead holder's rolled-back
// lease is taken over about one TTL later.
package rollbacktest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// Case is the store under test.
type Case struct {
	// Holder and Candidate are two Stores on the same leases, as two
	// replicas have.
	Holder, Candidate elector.Store
	// Write writes the row of l.Name back to l's holder, token and
	// version, unreleased, by hand. A store that cannot set a version
	// (etcd: it is the key's revision) writes the token and holder only.
	Write func(t *testing.T, l elector.Lease)
	// Versions is false for a store whose Write cannot set the version:
	// the tests that lower it are skipped.
	Versions bool
}

// timings renew every second and retry faster, so that a candidate whose
// watch completed tries its compare-and-set within each renewal.
var timings = elector.Config{TTL: 3 * time.Second, RenewInterval: time.Second, RetryInterval: 500 * time.Millisecond}

// slack is what a loaded machine may add to a takeover.
const slack = 3 * time.Second

// Run runs the tests of this package, each on a Case of its own from
// newCase; the slow ones in parallel.
func Run(t *testing.T, newCase func(*testing.T) Case) {
	t.Run("VersionsNeverRepeat", func(t *testing.T) { VersionsNeverRepeat(t, newCase(t), "job") })
	t.Run("NoSecondLeader", func(t *testing.T) {
		t.Parallel()
		NoSecondLeader(t, newCase(t), "job")
	})
	t.Run("DeadHolderTakenOver", func(t *testing.T) {
		t.Parallel()
		DeadHolderTakenOver(t, newCase(t), "job")
	})
}

// VersionsNeverRepeat: after a row went back to an older version of its
// term, the next renewal and the next takeover write versions above every
// version the row had, and the takeover's token exceeds every earlier one.
func VersionsNeverRepeat(t *testing.T, c Case, name string) {
	if !c.Versions {
		t.Skip("the store's versions cannot be set back by hand")
	}
	ctx := t.Context()
	first, err := c.Holder.TryAcquire(ctx, name, "a", timings.TTL, elector.Lease{})
	require.NoError(t, err)
	l := first
	for range 3 {
		l, err = c.Holder.Renew(ctx, l, timings.TTL)
		require.NoError(t, err)
	}
	c.Write(t, first) // three renewals behind
	renewed, err := c.Holder.Renew(ctx, first, timings.TTL)
	require.NoError(t, err)
	assert.Greater(t, renewed.Version, l.Version, "a renewal after a rollback repeated a version")

	c.Write(t, first)
	taken, err := c.Candidate.TryAcquire(ctx, name, "b", timings.TTL, first)
	require.NoError(t, err)
	assert.Greater(t, taken.Version, renewed.Version, "a takeover after a rollback repeated a version")
	assert.Greater(t, taken.Token, l.Token)
}

// NoSecondLeader: while the holder renews, its row goes back five versions
// (five renewals) with the same token. The candidate must not take the
// lease while the holder's term is trusted, and takes it soon after the
// holder resigns.
func NoSecondLeader(t *testing.T, c Case, name string) {
	if !c.Versions {
		t.Skip("the store's versions cannot be set back by hand")
	}
	ta := campaign(t, c.Holder, name, "a")
	won, stop := campaignAsync(t, c.Candidate, name, "b")
	defer stop()
	time.Sleep(2 * timings.TTL) // the candidate watches; more than five renewals
	l := ta.Lease()
	l.Version -= min(5, l.Version-1)
	c.Write(t, l)
	select {
	case tb := <-won:
		assert.Zero(t, trust(ta), "two leaders: b took the lease while a renewed it")
		require.NoError(t, tb.Resign(context.Background()))
		return
	case <-time.After(5*timings.RenewInterval + timings.TTL + slack):
	}
	require.NoError(t, ta.Err(), "the holder's term ended while it renewed")
	require.NoError(t, ta.Resign(t.Context()))
	select {
	case tb := <-won:
		assert.Greater(t, tb.Token(), ta.Token())
		require.NoError(t, tb.Resign(context.Background()))
	case <-time.After(timings.RetryInterval + slack):
		t.Fatal("the candidate did not take the released lease")
	}
}

// DeadHolderTakenOver: a dead holder's row goes back to an older term (or,
// if c.Versions, to an older version of its term) while a candidate
// watches it. The candidate takes it over no sooner than the holder's
// trust window and within TTL + RetryInterval of the rollback (with slack
// for load), with a token above every earlier one.
func DeadHolderTakenOver(t *testing.T, c Case, name string) {
	t.Run("older token", func(t *testing.T) {
		old, err := c.Holder.TryAcquire(t.Context(), name, "a", timings.TTL, elector.Lease{})
		require.NoError(t, err)
		old, err = c.Holder.Renew(t.Context(), old, timings.TTL) // a write that carries its token
		require.NoError(t, err)
		newer, err := c.Holder.TryAcquire(t.Context(), name, "c", timings.TTL, old)
		require.NoError(t, err)
		takenOver(t, c, name, old, newer.Token)
	})
	t.Run("same token, older version", func(t *testing.T) {
		if !c.Versions {
			t.Skip("the store's versions cannot be set back by hand")
		}
		old, err := c.Holder.TryAcquire(t.Context(), name+"/version", "a", timings.TTL, elector.Lease{})
		require.NoError(t, err)
		l := old
		for range 2 {
			l, err = c.Holder.Renew(t.Context(), l, timings.TTL)
			require.NoError(t, err)
		}
		takenOver(t, c, name+"/version", old, l.Token)
	})
}

// takenOver campaigns on the lease name, held by a dead holder, writes old
// back a second later, and checks the takeover.
func takenOver(t *testing.T, c Case, name string, old elector.Lease, lastToken uint64) {
	won, stop := campaignAsync(t, c.Candidate, name, "b")
	defer stop()
	time.Sleep(time.Second)
	restored := time.Now()
	c.Write(t, old)
	select {
	case tb := <-won:
		took := time.Since(restored)
		t.Logf("taken over %v after the rollback", took)
		assert.Greater(t, took, timings.TTL-elector.SafetyMargin(timings.TTL), "taken over before the rolled-back state was watched for its TTL")
		assert.Less(t, took, timings.TTL+timings.RetryInterval+slack, "taken over late")
		assert.Greater(t, tb.Token(), lastToken, "a token was reused or lowered")
		require.NoError(t, tb.Resign(context.Background()))
	case <-time.After(2*timings.TTL + timings.RetryInterval + slack):
		t.Fatal("stuck: the candidate did not take over the rolled-back lease of a dead holder")
	}
}

func elect(t *testing.T, s elector.Store, name, holder string) *elector.LeaseElector {
	t.Helper()
	cfg := timings
	cfg.Holder = holder
	e, err := elector.New(s, name, cfg)
	require.NoError(t, err)
	return e
}

func campaign(t *testing.T, s elector.Store, name, holder string) elector.Term {
	t.Helper()
	term, err := elect(t, s, name, holder).Campaign(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = term.Resign(context.Background()) })
	return term
}

func campaignAsync(t *testing.T, s elector.Store, name, holder string) (<-chan elector.Term, func()) {
	return CampaignAsync(t, elect(t, s, name, holder))
}

// CampaignAsync campaigns with e in a goroutine and returns the channel of
// its term and a function that ends the campaign, waits for it and resigns
// a term that was not received.
func CampaignAsync(t *testing.T, e *elector.LeaseElector) (<-chan elector.Term, func()) {
	ctx, cancel := context.WithCancel(t.Context())
	won := make(chan elector.Term, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if term, err := e.Campaign(ctx); err == nil {
			won <- term
		}
	}()
	return won, func() {
		cancel()
		<-done
		select {
		case term := <-won:
			_ = term.Resign(context.Background())
		default:
		}
	}
}

// trust is how long term is still trusted.
func trust(term elector.Term) time.Duration {
	return term.(interface{ TrustRemaining() time.Duration }).TrustRemaining()
}
