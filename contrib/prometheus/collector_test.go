package leaderprom_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	leaderprom "github.com/leaderaware/leaderaware/contrib/prometheus"
	"github.com/leaderaware/leaderaware/elector"
)

const holder = "host-42-5f3a9c" // never a label value

// newRegistry registers a new Collector on a fresh pedantic registry, which
// checks that what Collect sends matches what Describe announced.
func newRegistry(t *testing.T) (*leaderprom.Collector, *prometheus.Registry) {
	t.Helper()
	c := leaderprom.New()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	return c, reg
}

// compare checks what a scrape of reg returns for the named metrics (all if
// none are named).
func compare(t *testing.T, reg prometheus.Gatherer, want string, names ...string) {
	t.Helper()
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), names...))
}

// A term as a decorated job and its elector report it: campaign won,
// elected, the inner Start, a renewal, fenced writes, the inner Stop.
func TestScrapeOfATerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, reg := newRegistry(t)
		obs := func(e elector.Event) {
			e.Lease, e.Holder = "prices", holder
			c.Observe(e)
		}
		obs(elector.Event{Kind: elector.EventStoreOp, Op: elector.OpAcquire, Result: elector.ResultOK, Token: 7, Duration: 2 * time.Millisecond})
		obs(elector.Event{Kind: elector.EventCampaign, Result: elector.ResultOK, Token: 7, Trust: 2700 * time.Millisecond})
		obs(elector.Event{Kind: elector.EventElected, Token: 7, Trust: 2700 * time.Millisecond})
		obs(elector.Event{Kind: elector.EventJobStart, Token: 7, Result: elector.ResultOK, Duration: 30 * time.Millisecond})
		time.Sleep(time.Second)
		obs(elector.Event{Kind: elector.EventStoreOp, Op: elector.OpRenew, Result: elector.ResultOK, Token: 7, Duration: time.Millisecond, Trust: 2700 * time.Millisecond})
		obs(elector.Event{Kind: elector.EventFenced, Result: elector.ResultOK, Token: 7})
		obs(elector.Event{Kind: elector.EventFenced, Result: elector.ResultOK, Token: 7})
		obs(elector.Event{Kind: elector.EventFenced, Result: elector.ResultLost, Token: 7})
		obs(elector.Event{Kind: elector.EventJobStop, Token: 7, Result: elector.ResultError, Duration: 20 * time.Second, Err: errors.New("stop timed out")})
		time.Sleep(time.Second) // the trust left is 2.7s − 1s

		compare(t, reg, `
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
leaderaware_fenced_writes_total{lease="prices",result="committed"} 2
leaderaware_fenced_writes_total{lease="prices",result="refused"} 1
# HELP leaderaware_job_transition_duration_seconds Duration of the inner Start (phase start) and Stop (phase stop) of this replica's decorated jobs.
# TYPE leaderaware_job_transition_duration_seconds histogram
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="start",result="ok",le="0.001"} 0
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="start",result="ok",le="0.0025"} 0
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="start",result="ok",le="0.005"} 0
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="start",result="ok",le="0.01"} 0
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="start",result="ok",le="0.025"} 0
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="start",result="ok",le="0.05"} 1
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="start",result="ok",le="0.1"} 1
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="start",result="ok",le="0.25"} 1
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="start",result="ok",le="0.5"} 1
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="start",result="ok",le="1"} 1
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="start",result="ok",le="2.5"} 1
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="start",result="ok",le="5"} 1
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="start",result="ok",le="10"} 1
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="start",result="ok",le="15"} 1
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="start",result="ok",le="30"} 1
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="start",result="ok",le="60"} 1
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="start",result="ok",le="+Inf"} 1
leaderaware_job_transition_duration_seconds_sum{lease="prices",phase="start",result="ok"} 0.03
leaderaware_job_transition_duration_seconds_count{lease="prices",phase="start",result="ok"} 1
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="stop",result="error",le="0.001"} 0
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="stop",result="error",le="0.0025"} 0
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="stop",result="error",le="0.005"} 0
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="stop",result="error",le="0.01"} 0
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="stop",result="error",le="0.025"} 0
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="stop",result="error",le="0.05"} 0
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="stop",result="error",le="0.1"} 0
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="stop",result="error",le="0.25"} 0
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="stop",result="error",le="0.5"} 0
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="stop",result="error",le="1"} 0
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="stop",result="error",le="2.5"} 0
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="stop",result="error",le="5"} 0
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="stop",result="error",le="10"} 0
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="stop",result="error",le="15"} 0
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="stop",result="error",le="30"} 1
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="stop",result="error",le="60"} 1
leaderaware_job_transition_duration_seconds_bucket{lease="prices",phase="stop",result="error",le="+Inf"} 1
leaderaware_job_transition_duration_seconds_sum{lease="prices",phase="stop",result="error"} 20
leaderaware_job_transition_duration_seconds_count{lease="prices",phase="stop",result="error"} 1
# HELP leaderaware_leader 1 while a decorated job of this replica leads the lease, else 0.
# TYPE leaderaware_leader gauge
leaderaware_leader{lease="prices"} 1
# HELP leaderaware_store_operation_duration_seconds Duration of the lease store calls this replica's electors made.
# TYPE leaderaware_store_operation_duration_seconds histogram
leaderaware_store_operation_duration_seconds_bucket{op="acquire",result="ok",le="0.0001"} 0
leaderaware_store_operation_duration_seconds_bucket{op="acquire",result="ok",le="0.00025"} 0
leaderaware_store_operation_duration_seconds_bucket{op="acquire",result="ok",le="0.0005"} 0
leaderaware_store_operation_duration_seconds_bucket{op="acquire",result="ok",le="0.001"} 0
leaderaware_store_operation_duration_seconds_bucket{op="acquire",result="ok",le="0.0025"} 1
leaderaware_store_operation_duration_seconds_bucket{op="acquire",result="ok",le="0.005"} 1
leaderaware_store_operation_duration_seconds_bucket{op="acquire",result="ok",le="0.01"} 1
leaderaware_store_operation_duration_seconds_bucket{op="acquire",result="ok",le="0.025"} 1
leaderaware_store_operation_duration_seconds_bucket{op="acquire",result="ok",le="0.05"} 1
leaderaware_store_operation_duration_seconds_bucket{op="acquire",result="ok",le="0.1"} 1
leaderaware_store_operation_duration_seconds_bucket{op="acquire",result="ok",le="0.25"} 1
leaderaware_store_operation_duration_seconds_bucket{op="acquire",result="ok",le="0.5"} 1
leaderaware_store_operation_duration_seconds_bucket{op="acquire",result="ok",le="1"} 1
leaderaware_store_operation_duration_seconds_bucket{op="acquire",result="ok",le="2.5"} 1
leaderaware_store_operation_duration_seconds_bucket{op="acquire",result="ok",le="5"} 1
leaderaware_store_operation_duration_seconds_bucket{op="acquire",result="ok",le="10"} 1
leaderaware_store_operation_duration_seconds_bucket{op="acquire",result="ok",le="+Inf"} 1
leaderaware_store_operation_duration_seconds_sum{op="acquire",result="ok"} 0.002
leaderaware_store_operation_duration_seconds_count{op="acquire",result="ok"} 1
leaderaware_store_operation_duration_seconds_bucket{op="renew",result="ok",le="0.0001"} 0
leaderaware_store_operation_duration_seconds_bucket{op="renew",result="ok",le="0.00025"} 0
leaderaware_store_operation_duration_seconds_bucket{op="renew",result="ok",le="0.0005"} 0
leaderaware_store_operation_duration_seconds_bucket{op="renew",result="ok",le="0.001"} 1
leaderaware_store_operation_duration_seconds_bucket{op="renew",result="ok",le="0.0025"} 1
leaderaware_store_operation_duration_seconds_bucket{op="renew",result="ok",le="0.005"} 1
leaderaware_store_operation_duration_seconds_bucket{op="renew",result="ok",le="0.01"} 1
leaderaware_store_operation_duration_seconds_bucket{op="renew",result="ok",le="0.025"} 1
leaderaware_store_operation_duration_seconds_bucket{op="renew",result="ok",le="0.05"} 1
leaderaware_store_operation_duration_seconds_bucket{op="renew",result="ok",le="0.1"} 1
leaderaware_store_operation_duration_seconds_bucket{op="renew",result="ok",le="0.25"} 1
leaderaware_store_operation_duration_seconds_bucket{op="renew",result="ok",le="0.5"} 1
leaderaware_store_operation_duration_seconds_bucket{op="renew",result="ok",le="1"} 1
leaderaware_store_operation_duration_seconds_bucket{op="renew",result="ok",le="2.5"} 1
leaderaware_store_operation_duration_seconds_bucket{op="renew",result="ok",le="5"} 1
leaderaware_store_operation_duration_seconds_bucket{op="renew",result="ok",le="10"} 1
leaderaware_store_operation_duration_seconds_bucket{op="renew",result="ok",le="+Inf"} 1
leaderaware_store_operation_duration_seconds_sum{op="renew",result="ok"} 0.001
leaderaware_store_operation_duration_seconds_count{op="renew",result="ok"} 1
# HELP leaderaware_term_token Fencing token of this replica's current or last term of the lease.
# TYPE leaderaware_term_token gauge
leaderaware_term_token{lease="prices"} 7
# HELP leaderaware_trust_remaining_seconds How long this replica still trusts its term of the lease, from its last successful acquire or renew; 0 when it holds none.
# TYPE leaderaware_trust_remaining_seconds gauge
leaderaware_trust_remaining_seconds{lease="prices"} 1.7
`)

		obs(elector.Event{Kind: elector.EventDemoted, Token: 7, Cause: elector.CauseLost, Err: elector.ErrLeaseLost})
		compare(t, reg, `
# HELP leaderaware_demotions_total Terms of the lease this replica's decorated jobs ended, by cause.
# TYPE leaderaware_demotions_total counter
leaderaware_demotions_total{cause="abandoned",lease="prices"} 0
leaderaware_demotions_total{cause="expired",lease="prices"} 0
leaderaware_demotions_total{cause="handed_off",lease="prices"} 0
leaderaware_demotions_total{cause="lost",lease="prices"} 1
leaderaware_demotions_total{cause="resigned",lease="prices"} 0
leaderaware_demotions_total{cause="start_failed",lease="prices"} 0
leaderaware_demotions_total{cause="store_error",lease="prices"} 0
# HELP leaderaware_leader 1 while a decorated job of this replica leads the lease, else 0.
# TYPE leaderaware_leader gauge
leaderaware_leader{lease="prices"} 0
# HELP leaderaware_term_token Fencing token of this replica's current or last term of the lease.
# TYPE leaderaware_term_token gauge
leaderaware_term_token{lease="prices"} 7
# HELP leaderaware_trust_remaining_seconds How long this replica still trusts its term of the lease, from its last successful acquire or renew; 0 when it holds none.
# TYPE leaderaware_trust_remaining_seconds gauge
leaderaware_trust_remaining_seconds{lease="prices"} 0
`, "leaderaware_leader", "leaderaware_demotions_total", "leaderaware_term_token", "leaderaware_trust_remaining_seconds")
	})
}

const (
	trustHelp = `
# HELP leaderaware_trust_remaining_seconds How long this replica still trusts its term of the lease, from its last successful acquire or renew; 0 when it holds none.
# TYPE leaderaware_trust_remaining_seconds gauge
`
	electionsHelp = `
# HELP leaderaware_elections_total Terms of the lease this replica won.
# TYPE leaderaware_elections_total counter
`
)

func TestTrustRunsDownToZeroNotBelow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, reg := newRegistry(t)
		c.Observe(elector.Event{Kind: elector.EventCampaign, Lease: "a", Result: elector.ResultOK, Token: 1, Trust: 2 * time.Second})
		time.Sleep(1500 * time.Millisecond)
		compare(t, reg, trustHelp+`leaderaware_trust_remaining_seconds{lease="a"} 0.5`+"\n", "leaderaware_trust_remaining_seconds")
		time.Sleep(time.Hour) // renewals failed, with no event that ends the term
		compare(t, reg, trustHelp+`leaderaware_trust_remaining_seconds{lease="a"} 0`+"\n", "leaderaware_trust_remaining_seconds")
	})
}

func TestTrustEndsWithTheTerm(t *testing.T) {
	ok := func(lease string) elector.Event {
		return elector.Event{Kind: elector.EventCampaign, Lease: lease, Result: elector.ResultOK, Token: 1, Trust: time.Hour}
	}
	synctest.Test(t, func(t *testing.T) {
		c, reg := newRegistry(t)
		for _, e := range []elector.Event{ok("released"), ok("lost"), ok("renewfailed"), ok("demoted"), ok("late"), ok("kept")} {
			c.Observe(e)
		}
		c.Observe(elector.Event{Kind: elector.EventStoreOp, Lease: "released", Op: elector.OpRelease, Result: elector.ResultOK})
		c.Observe(elector.Event{Kind: elector.EventStoreOp, Lease: "lost", Op: elector.OpRenew, Result: elector.ResultLost})
		c.Observe(elector.Event{Kind: elector.EventStoreOp, Lease: "renewfailed", Op: elector.OpRenew, Result: elector.ResultError, Err: errors.New("timeout")})
		c.Observe(elector.Event{Kind: elector.EventDemoted, Lease: "demoted", Cause: elector.CauseExpired})
		// A renewal that returned after the decorated job's term ended.
		c.Observe(elector.Event{Kind: elector.EventElected, Lease: "late", Token: 1})
		c.Observe(elector.Event{Kind: elector.EventDemoted, Lease: "late", Cause: elector.CauseExpired})
		c.Observe(elector.Event{Kind: elector.EventStoreOp, Lease: "late", Op: elector.OpRenew, Result: elector.ResultOK, Trust: time.Hour})
		compare(t, reg, trustHelp+`
leaderaware_trust_remaining_seconds{lease="demoted"} 0
leaderaware_trust_remaining_seconds{lease="kept"} 3600
leaderaware_trust_remaining_seconds{lease="late"} 0
leaderaware_trust_remaining_seconds{lease="lost"} 0
leaderaware_trust_remaining_seconds{lease="released"} 0
leaderaware_trust_remaining_seconds{lease="renewfailed"} 3600
`, "leaderaware_trust_remaining_seconds")
	})
}

// A term is counted once whether the elector, the decorated job or both
// report it.
func TestElectionsCountTermsOnce(t *testing.T) {
	c, reg := newRegistry(t)
	for _, e := range []elector.Event{
		{Kind: elector.EventCampaign, Lease: "both", Result: elector.ResultOK, Token: 3},
		{Kind: elector.EventElected, Lease: "both", Token: 3},
		{Kind: elector.EventDemoted, Lease: "both", Token: 3, Cause: elector.CauseStartFailed},
		{Kind: elector.EventCampaign, Lease: "both", Result: elector.ResultOK, Token: 4},
		{Kind: elector.EventElected, Lease: "both", Token: 4},
		{Kind: elector.EventCampaign, Lease: "elector", Result: elector.ResultOK, Token: 1},
		{Kind: elector.EventCampaign, Lease: "elector", Result: elector.ResultHeld},
		{Kind: elector.EventCampaign, Lease: "elector", Result: elector.ResultError, Err: errors.New("down")},
		{Kind: elector.EventElected, Lease: "job"},
		{Kind: elector.EventElected, Lease: "job"}, // an elector that reports no tokens
	} {
		c.Observe(e)
	}
	compare(t, reg, electionsHelp+`
leaderaware_elections_total{lease="both"} 2
leaderaware_elections_total{lease="elector"} 1
leaderaware_elections_total{lease="job"} 2
`, "leaderaware_elections_total")
}

// Values the Collector does not know are labeled "unknown"; events without
// a lease count only where the lease is not a label.
func TestUnknownValuesAndNoLease(t *testing.T) {
	c, reg := newRegistry(t)
	c.Observe(elector.Event{Kind: elector.EventStoreOp, Op: elector.Op(200), Duration: time.Second})
	c.Observe(elector.Event{Kind: elector.EventDemoted, Lease: "a", Cause: elector.Cause(99)})
	c.Observe(elector.Event{Kind: elector.EventFenced, Result: elector.ResultOK}) // no term in ctx
	c.Observe(elector.Event{Kind: elector.EventKind(77), Lease: "b"})
	compare(t, reg, `
# HELP leaderaware_demotions_total Terms of the lease this replica's decorated jobs ended, by cause.
# TYPE leaderaware_demotions_total counter
leaderaware_demotions_total{cause="abandoned",lease="a"} 0
leaderaware_demotions_total{cause="expired",lease="a"} 0
leaderaware_demotions_total{cause="handed_off",lease="a"} 0
leaderaware_demotions_total{cause="lost",lease="a"} 0
leaderaware_demotions_total{cause="resigned",lease="a"} 0
leaderaware_demotions_total{cause="start_failed",lease="a"} 0
leaderaware_demotions_total{cause="store_error",lease="a"} 0
leaderaware_demotions_total{cause="unknown",lease="a"} 1
leaderaware_demotions_total{cause="abandoned",lease="b"} 0
leaderaware_demotions_total{cause="expired",lease="b"} 0
leaderaware_demotions_total{cause="handed_off",lease="b"} 0
leaderaware_demotions_total{cause="lost",lease="b"} 0
leaderaware_demotions_total{cause="resigned",lease="b"} 0
leaderaware_demotions_total{cause="start_failed",lease="b"} 0
leaderaware_demotions_total{cause="store_error",lease="b"} 0
# HELP leaderaware_store_operation_duration_seconds Duration of the lease store calls this replica's electors made.
# TYPE leaderaware_store_operation_duration_seconds histogram
leaderaware_store_operation_duration_seconds_bucket{op="unknown",result="unknown",le="0.0001"} 0
leaderaware_store_operation_duration_seconds_bucket{op="unknown",result="unknown",le="0.00025"} 0
leaderaware_store_operation_duration_seconds_bucket{op="unknown",result="unknown",le="0.0005"} 0
leaderaware_store_operation_duration_seconds_bucket{op="unknown",result="unknown",le="0.001"} 0
leaderaware_store_operation_duration_seconds_bucket{op="unknown",result="unknown",le="0.0025"} 0
leaderaware_store_operation_duration_seconds_bucket{op="unknown",result="unknown",le="0.005"} 0
leaderaware_store_operation_duration_seconds_bucket{op="unknown",result="unknown",le="0.01"} 0
leaderaware_store_operation_duration_seconds_bucket{op="unknown",result="unknown",le="0.025"} 0
leaderaware_store_operation_duration_seconds_bucket{op="unknown",result="unknown",le="0.05"} 0
leaderaware_store_operation_duration_seconds_bucket{op="unknown",result="unknown",le="0.1"} 0
leaderaware_store_operation_duration_seconds_bucket{op="unknown",result="unknown",le="0.25"} 0
leaderaware_store_operation_duration_seconds_bucket{op="unknown",result="unknown",le="0.5"} 0
leaderaware_store_operation_duration_seconds_bucket{op="unknown",result="unknown",le="1"} 1
leaderaware_store_operation_duration_seconds_bucket{op="unknown",result="unknown",le="2.5"} 1
leaderaware_store_operation_duration_seconds_bucket{op="unknown",result="unknown",le="5"} 1
leaderaware_store_operation_duration_seconds_bucket{op="unknown",result="unknown",le="10"} 1
leaderaware_store_operation_duration_seconds_bucket{op="unknown",result="unknown",le="+Inf"} 1
leaderaware_store_operation_duration_seconds_sum{op="unknown",result="unknown"} 1
leaderaware_store_operation_duration_seconds_count{op="unknown",result="unknown"} 1
`, "leaderaware_demotions_total", "leaderaware_store_operation_duration_seconds")
	n, err := testutil.GatherAndCount(reg, "leaderaware_fenced_writes_total")
	require.NoError(t, err)
	assert.Equal(t, 4, n, "committed and refused of leases a and b, none for the lease-less write")
}

// Every kind of event, with the holder set: no metric has a holder label or
// the holder as a value, and the metrics pass Prometheus' lint.
func TestNoHolderLabel(t *testing.T) {
	c, reg := newRegistry(t)
	for kind := elector.EventStoreOp; kind <= elector.EventJobStop; kind++ {
		for r := elector.ResultOK; r <= elector.ResultError; r++ {
			c.Observe(elector.Event{Kind: kind, Lease: "job", Holder: holder, Token: 1, Op: elector.OpRenew,
				Result: r, Cause: elector.CauseExpired, Duration: time.Millisecond, Trust: time.Second})
		}
	}
	families, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, families, 8)
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				assert.NotEqual(t, "holder", l.GetName(), f.GetName())
				assert.NotContains(t, l.GetValue(), holder, f.GetName())
			}
		}
	}
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// Events from many goroutines while scrapes run (run with -race).
func TestConcurrentObserveAndScrape(t *testing.T) {
	c, reg := newRegistry(t)
	const writers, each = 4, 1000
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				c.Observe(elector.Event{Kind: elector.EventFenced, Lease: "job", Result: elector.ResultOK})
				c.Observe(elector.Event{Kind: elector.EventStoreOp, Lease: "job", Op: elector.OpRenew, Result: elector.ResultOK, Trust: time.Second})
			}
		})
	}
	scrapes := make(chan struct{})
	go func() {
		defer close(scrapes)
		for range 20 {
			_, err := reg.Gather()
			assert.NoError(t, err)
		}
	}()
	wg.Wait()
	<-scrapes
	compare(t, reg, `
# HELP leaderaware_fenced_writes_total Fenced writes of this replica's terms of the lease: committed, or refused because the term was over.
# TYPE leaderaware_fenced_writes_total counter
leaderaware_fenced_writes_total{lease="job",result="committed"} 4000
leaderaware_fenced_writes_total{lease="job",result="refused"} 0
`, "leaderaware_fenced_writes_total")
}

func TestObserveDoesNotAllocate(t *testing.T) {
	c := leaderprom.New()
	events := benchEvents()
	for _, e := range events {
		c.Observe(e) // the first event of a lease adds it
	}
	for _, e := range events {
		assert.Zero(t, testing.AllocsPerRun(100, func() { c.Observe(e) }), e.Kind.String())
	}
}
