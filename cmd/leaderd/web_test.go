package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

// priceLeader matches the sample of leaderaware_leader for price-refresh
// in /metrics.
var priceLeader = regexp.MustCompile(`(?m)^leaderaware_leader\{lease="price-refresh"\} (\S+)$`)

// leadsPrices reports whether the instance's /metrics says that it leads
// price-refresh. It may run on a goroutine of testify's.
func leadsPrices(t *testing.T, in *instance) bool {
	code, body := get(t, in.url(t)+"/metrics")
	if code != http.StatusOK {
		t.Errorf("/metrics: %d %s", code, body)
		return false
	}
	m := priceLeader.FindStringSubmatch(body)
	return m != nil && m[1] == "1"
}

// TestMetricsOneLeader scrapes /metrics of two instances on one SQLite
// file, as Prometheus would: leaderaware_leader{lease="price-refresh"} is 1
// on exactly one of them, and once that one stops, 1 on the other within a
// second.
func TestMetricsOneLeader(t *testing.T) {
	db := tempDB(t)
	a := startInstance(t, withHTTP(fastOptions(db, "instance-a")))
	require.Eventually(t, func() bool { return a.rec.count("leaderd running") == 1 }, 5*time.Second, 5*time.Millisecond,
		"a should start\n%s", a.rec)
	b := startInstance(t, withHTTP(fastOptions(db, "instance-b")))
	require.Eventually(t, func() bool { return b.rec.count("leaderd running") == 1 }, 5*time.Second, 5*time.Millisecond,
		"b should start\n%s", b.rec)

	var leader, follower *instance
	require.Eventually(t, func() bool {
		la, lb := leadsPrices(t, a), leadsPrices(t, b)
		switch {
		case la && !lb:
			leader, follower = a, b
		case lb && !la:
			leader, follower = b, a
		}
		return la != lb
	}, 5*time.Second, 20*time.Millisecond, "price-refresh should lead on exactly one instance, by /metrics")
	require.Never(t, func() bool { return leadsPrices(t, a) == leadsPrices(t, b) }, 500*time.Millisecond, 50*time.Millisecond,
		"price-refresh should keep leading on exactly one instance, by /metrics")
	_, body := get(t, follower.url(t)+"/metrics")
	assert.Contains(t, body, "go_goroutines ", "the Go collector")

	stopped := time.Now()
	leader.stopAndWait(t)
	require.Eventually(t, func() bool { return leadsPrices(t, follower) }, time.Second-time.Since(stopped), 10*time.Millisecond,
		"the other instance's /metrics should say it leads price-refresh within a second of the leader's stop")
}

// TestHTTP checks the probes, the status page and /leases of one instance:
// it is live and ready, leading or not; the page is HTML that loads nothing
// from elsewhere; /leases has its leases, jobs and elections.
func TestHTTP(t *testing.T) {
	in := startInstance(t, withHTTP(fastOptions(tempDB(t), "solo")))
	base := in.url(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		code, body := get(t, base+path)
		assert.Equal(t, http.StatusOK, code, path)
		assert.Equal(t, "ok\n", body, path)
	}
	code, body := get(t, base+"/nope")
	assert.Equal(t, http.StatusNotFound, code, "/nope: %s", body)

	resp, err := httpClient.Get(base + "/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.Equal(t, pageCSP, resp.Header.Get("Content-Security-Policy"))
	assert.NotRegexp(t, `(?i)(src|href|url)\s*[=(]\s*["']?(https?:)?//`, string(pageHTML), "the page must load nothing from elsewhere")

	require.Eventually(t, func() bool {
		for _, job := range leases {
			if in.rec.leads(job) != 1 {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "solo should lead every job\n%s", in.rec)
	p := leasesOf(t, in)
	assert.Equal(t, "solo", p.Holder)
	assert.True(t, strings.HasPrefix(p.Store, "sqlite "), "store %q", p.Store)
	assert.Empty(t, p.Error)
	require.Len(t, p.Leases, len(leases))
	require.Len(t, p.Jobs, len(leases))
	for i, job := range leases {
		l, j := p.Leases[i], p.Jobs[i]
		assert.Equal(t, job, l.Name)
		assert.Equal(t, "solo", l.Holder)
		assert.False(t, l.Released)
		assert.Regexp(t, `^in \d`, l.Expires)
		require.NotNil(t, l.RenewedAgoSeconds)
		assert.Less(t, *l.RenewedAgoSeconds, 3.0)
		assert.Equal(t, job, j.Lease)
		assert.True(t, j.Leading, job)
		assert.Equal(t, l.Token, j.Token, "the job's term is the lease's")
		assert.NotNil(t, j.TrustRemainingSeconds)
		assert.Empty(t, j.Overran)
	}
	elected := map[string]uint64{}
	for _, tr := range p.Transitions {
		if tr.Event == "elected" {
			elected[tr.Lease] = tr.Token
		}
	}
	for _, l := range p.Leases {
		assert.Equal(t, l.Token, elected[l.Name], "the transitions should show the election of %s", l.Name)
	}
}

// fakeRegistry is a registry whose probes fail as told.
type fakeRegistry struct{ healthy, ready error }

func (r fakeRegistry) Jobs() []decorator.Snapshot  { return nil }
func (r fakeRegistry) Healthy(*http.Request) error { return r.healthy }
func (r fakeRegistry) Ready(*http.Request) error   { return r.ready }

// TestProbeFails: a failing check is a 503 with its error; the other probe
// is unaffected. /leases of a store that cannot be read is a 503 that says
// why, with the instance's jobs and transitions still there.
func TestProbeFails(t *testing.T) {
	s := &site{
		holder: "h", where: "memory", store: elector.NewMemoryStore(), ring: new(transitions),
		reg:     fakeRegistry{healthy: errors.New("inner Stop of price-refresh overran")},
		metrics: http.NotFoundHandler(),
	}
	srv := httptest.NewServer(s.handler())
	defer srv.Close()
	code, body := get(t, srv.URL+"/healthz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "inner Stop of price-refresh overran\n", body)
	code, _ = get(t, srv.URL+"/readyz")
	assert.Equal(t, http.StatusOK, code)

	code, body = get(t, srv.URL+"/leases")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, `"error":"leaderd cannot list the leases of a *elector.MemoryStore"`)
	assert.Contains(t, body, `"transitions":[]`)
}

// TestTransitions: the ring keeps the last keptTransitions elections and
// demotions, newest first, with the cause and error of a demotion, and
// ignores every other event.
func TestTransitions(t *testing.T) {
	var r transitions
	assert.Empty(t, r.last())
	r.Observe(elector.Event{Kind: elector.EventStoreOp, Lease: "x", Op: elector.OpRenew, Result: elector.ResultOK})
	assert.Empty(t, r.last())
	for i := range keptTransitions + 5 {
		r.Observe(elector.Event{Kind: elector.EventElected, Lease: fmt.Sprint("lease-", i), Token: uint64(i)})
	}
	r.Observe(elector.Event{Kind: elector.EventDemoted, Lease: "p", Token: 99, Cause: elector.CauseLost, Err: elector.ErrLeaseLost})
	r.Observe(elector.Event{Kind: elector.EventDemoted, Lease: "q", Token: 100, Cause: elector.CauseResigned, Err: elector.ErrResigned})
	got := r.last()
	require.Len(t, got, keptTransitions)
	assert.Equal(t, transition{At: got[0].At, Lease: "q", Event: "demoted", Token: 100, Cause: "resigned"}, got[0])
	assert.Equal(t, transition{At: got[1].At, Lease: "p", Event: "demoted", Token: 99, Cause: "lost", Error: elector.ErrLeaseLost.Error()}, got[1])
	assert.Equal(t, "lease-24", got[2].Lease)
	assert.Equal(t, "lease-7", got[keptTransitions-1].Lease, "the oldest kept")
	assert.False(t, got[0].At.Before(got[keptTransitions-1].At))
}
