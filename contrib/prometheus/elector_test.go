package leaderprom_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
)

// storeOps is the exposition of the store-call histogram with one series:
// op, result and count calls, each taking no time (fake time).
func storeOps(series ...string) string {
	s := `
# HELP leaderaware_store_operation_duration_seconds Duration of the lease store calls this replica's electors made.
# TYPE leaderaware_store_operation_duration_seconds histogram
`
	for i := 0; i < len(series); i += 3 {
		labels := `op="` + series[i] + `",result="` + series[i+1] + `"`
		n := series[i+2]
		for _, le := range []string{"0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"} {
			s += "leaderaware_store_operation_duration_seconds_bucket{" + labels + `,le="` + le + `"} ` + n + "\n"
		}
		s += "leaderaware_store_operation_duration_seconds_sum{" + labels + "} 0\n"
		s += "leaderaware_store_operation_duration_seconds_count{" + labels + "} " + n + "\n"
	}
	return s
}

// Two replicas, each with its own Collector, campaign for one lease on a
// memory store: what each one's scrape shows while a leads, after it
// resigns, and once b leads.
func TestScrapeOfLeaseElectors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := elector.NewMemoryStore()
		newElector := func(holder string) (*elector.LeaseElector, func(string, ...string)) {
			c, reg := newRegistry(t)
			e, err := elector.New(store, "prices", elector.Config{TTL: 3 * time.Second, RenewInterval: time.Second, RetryInterval: 2 * time.Second, Holder: holder, Observer: c})
			require.NoError(t, err)
			return e, func(want string, names ...string) { t.Helper(); compare(t, reg, want, names...) }
		}
		a, scrapeA := newElector("a")
		b, scrapeB := newElector("b")

		termA, err := a.Campaign(t.Context())
		require.NoError(t, err)
		time.Sleep(1500 * time.Millisecond) // one renewal, at 1s
		// Without a decorated job reporting to it, leaderaware_leader stays 0.
		scrapeA(`
# HELP leaderaware_demotions_total Terms of the lease this replica's decorated jobs ended, by cause.
# TYPE leaderaware_demotions_total counter
leaderaware_demotions_total{cause="abandoned",lease="prices"} 0
leaderaware_demotions_total{cause="expired",lease="prices"} 0
leaderaware_demotions_total{cause="handed_off",lease="prices"} 0
leaderaware_demotions_total{cause="lost",lease="prices"} 0
leaderaware_demotions_total{cause="resigned",lease="prices"} 0
leaderaware_demotions_total{cause="start_failed",lease="prices"} 0
leaderaware_demotions_total{cause="store_error",lease="prices"} 0
# HELP leaderaware_elections_total Terms of the lease this replica won.
# TYPE leaderaware_elections_total counter
leaderaware_elections_total{lease="prices"} 1
# HELP leaderaware_fenced_writes_total Fenced writes of this replica's terms of the lease: committed, or refused because the term was over.
# TYPE leaderaware_fenced_writes_total counter
leaderaware_fenced_writes_total{lease="prices",result="committed"} 0
leaderaware_fenced_writes_total{lease="prices",result="refused"} 0
# HELP leaderaware_leader 1 while a decorated job of this replica leads the lease, else 0.
# TYPE leaderaware_leader gauge
leaderaware_leader{lease="prices"} 0
# HELP leaderaware_term_token Fencing token of this replica's current or last term of the lease.
# TYPE leaderaware_term_token gauge
leaderaware_term_token{lease="prices"} 1
` + trustHelp + `leaderaware_trust_remaining_seconds{lease="prices"} 2.2
` + storeOps("acquire", "ok", "1", "renew", "ok", "1"))

		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		_, err = b.Campaign(ctx)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		scrapeB(electionsHelp+`leaderaware_elections_total{lease="prices"} 0
`+trustHelp+`leaderaware_trust_remaining_seconds{lease="prices"} 0
`+storeOps("acquire", "held", "1"),
			"leaderaware_elections_total", "leaderaware_trust_remaining_seconds", "leaderaware_store_operation_duration_seconds")

		require.NoError(t, termA.Resign(t.Context()))
		scrapeA(trustHelp+`leaderaware_trust_remaining_seconds{lease="prices"} 0
`+storeOps("acquire", "ok", "1", "release", "ok", "1", "renew", "ok", "1"),
			"leaderaware_trust_remaining_seconds", "leaderaware_store_operation_duration_seconds")

		termB, err := b.Campaign(t.Context())
		require.NoError(t, err)
		scrapeB(electionsHelp+`leaderaware_elections_total{lease="prices"} 1
# HELP leaderaware_term_token Fencing token of this replica's current or last term of the lease.
# TYPE leaderaware_term_token gauge
leaderaware_term_token{lease="prices"} 2
`+trustHelp+`leaderaware_trust_remaining_seconds{lease="prices"} 2.7
`, "leaderaware_elections_total", "leaderaware_term_token", "leaderaware_trust_remaining_seconds")
		require.NoError(t, termB.Resign(t.Context()))
	})
}
