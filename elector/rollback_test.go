package elector_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/rollbacktest"
)

// rollbackTimings retry faster than the holder renews, so that a candidate
// whose watch completed tries its compare-and-set within each renewal.
var rollbackTimings = elector.Config{TTL: 3 * time.Second, RenewInterval: time.Second, RetryInterval: 500 * time.Millisecond}

// TestRolledBackVersionMakesNoSecondLeader: a row that keeps its token but
// goes back a few versions while its holder lives (a failover to a standby
// that lagged) climbs back through the version a candidate watched; the
// candidate must not take the lease when a renewal writes that version
// again. The memory store's versions repeat after a Restore: only the
// elector's watch keeps one leader here.
func TestRolledBackVersionMakesNoSecondLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := elector.NewMemoryStore()
		ta := campaign(t, newElector(t, s, "a", rollbackTimings))
		won, stop := rollbacktest.CampaignAsync(t, newElector(t, s, "b", rollbackTimings))
		defer stop()
		time.Sleep(5500 * time.Millisecond) // renewed at 1s ... 5s; b watches the last
		l, err := s.Get(t.Context(), "job")
		require.NoError(t, err)
		l.Version -= 4 // four renewals behind: written again at 9s
		s.Restore(l)
		select {
		case tb := <-won:
			assert.Zero(t, ta.(interface{ TrustRemaining() time.Duration }).TrustRemaining(), "two leaders: b took the lease while a still renewed it")
			require.NoError(t, tb.Resign(t.Context()))
		case <-time.After(10 * time.Second):
		}
		require.NoError(t, ta.Resign(t.Context()))
		select {
		case tb := <-won:
			require.NoError(t, tb.Resign(t.Context()))
		case <-time.After(rollbackTimings.RetryInterval):
			t.Fatal("b did not take the released lease")
		}
	})
}

// TestRolledBackLeaseOfDeadHolderIsTakenOver: a row rolled back to an older
// state (an older term, or an older version of the same term) while its
// holder is dead is taken over within two TTLs after the rollback, whether
// the store reads in bulk or not: the watch drops the older state it reads,
// until the candidate's compare-and-set on the newer one is answered with
// it, and then watches it for a TTL.
func TestRolledBackLeaseOfDeadHolderIsTakenOver(t *testing.T) {
	for _, tt := range []struct {
		name string
		// held leaves the lease held by a dead holder and returns the
		// older state to restore.
		held func(t *testing.T, s elector.Store) elector.Lease
	}{
		{"older token", func(t *testing.T, s elector.Store) elector.Lease {
			old, err := s.TryAcquire(t.Context(), "job", "a", rollbackTimings.TTL, elector.Lease{})
			require.NoError(t, err)
			_, err = s.TryAcquire(t.Context(), "job", "c", rollbackTimings.TTL, old)
			require.NoError(t, err)
			return old
		}},
		{"same token, older version", func(t *testing.T, s elector.Store) elector.Lease {
			old, err := s.TryAcquire(t.Context(), "job", "a", rollbackTimings.TTL, elector.Lease{})
			require.NoError(t, err)
			l := old
			for range 2 {
				l, err = s.Renew(t.Context(), l, rollbackTimings.TTL)
				require.NoError(t, err)
			}
			return old
		}},
	} {
		for _, polls := range []bool{false, true} {
			name := tt.name + ", watching"
			if polls {
				name = tt.name + ", polling"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					mem := elector.NewMemoryStore()
					var s elector.Store = mem
					if polls {
						s = &countingStore{Store: mem} // hides the watchers
					}
					old := tt.held(t, mem)
					won, stop := rollbacktest.CampaignAsync(t, newElector(t, s, "b", rollbackTimings))
					defer stop()
					time.Sleep(time.Second)
					mem.Restore(old)
					restored := time.Now()
					select {
					case tb := <-won:
						took := time.Since(restored)
						assert.GreaterOrEqual(t, took, rollbackTimings.TTL, "taken over before the restored state was watched for its TTL")
						assert.LessOrEqual(t, took, 2*rollbackTimings.TTL+rollbackTimings.RetryInterval, "taken over later than 2 TTL + RetryInterval after the rollback")
						assert.Greater(t, tb.Token(), old.Token)
						require.NoError(t, tb.Resign(t.Context()))
					case <-time.After(time.Minute):
						t.Fatal("stuck: the candidate never took over the rolled-back lease of a dead holder")
					}
				})
			})
		}
	}
}
