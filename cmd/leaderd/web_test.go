package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/sqlitelease"
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
// it is live and ready, leading or not; the page is statuspage's, read-only;
// /leases has its leases and jobs.
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
	assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'self'")
	code, _ = get(t, base+"/page.js")
	assert.Equal(t, http.StatusOK, code, "/page.js")
	resp, err = httpClient.Post(base+"/leases", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "the page is read-only")

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
	assert.Empty(t, p.Error)
	require.Len(t, p.Leases, len(leases))
	require.Len(t, p.Jobs, len(leases))
	for i, job := range leases {
		l, j := p.Leases[i], p.Jobs[i]
		assert.Equal(t, job, l.Name)
		assert.Equal(t, "solo", l.Holder)
		assert.False(t, l.Free)
		assert.Empty(t, l.Waiting, "solo leads %s", job)
		require.NotNil(t, l.Expires)
		assert.Equal(t, 1.5, l.TTLSeconds)
		assert.Equal(t, job, j.Lease)
		assert.True(t, j.Leading, job)
		assert.Equal(t, l.Token, j.Token, "the job's term is the lease's")
		assert.NotNil(t, j.TrustRemainingSeconds)
		assert.True(t, j.Healthy)
	}
}

// fakeRegistry is a registry whose probes fail as told.
type fakeRegistry struct{ healthy, ready error }

func (r fakeRegistry) Healthy(*http.Request) error { return r.healthy }
func (r fakeRegistry) Ready(*http.Request) error   { return r.ready }

// TestProbeFails: a failing check is a 503 with its error; the other probe
// is unaffected.
func TestProbeFails(t *testing.T) {
	s := &site{
		reg:     fakeRegistry{healthy: errors.New("inner Stop of price-refresh overran")},
		page:    http.NotFoundHandler(),
		metrics: http.NotFoundHandler(),
	}
	srv := httptest.NewServer(s.handler())
	defer srv.Close()
	code, body := get(t, srv.URL+"/healthz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "inner Stop of price-refresh overran\n", body)
	code, _ = get(t, srv.URL+"/readyz")
	assert.Equal(t, http.StatusOK, code)
}

// TestPageSourceList: the page lists the store's leases, a released one
// as free, and says why it cannot list a store it does not know.
func TestPageSourceList(t *testing.T) {
	ctx := t.Context()
	s, err := sqlitelease.Open(tempDB(t))
	require.NoError(t, err)
	defer s.Close()
	held, err := s.TryAcquire(ctx, "held", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	freed, err := s.TryAcquire(ctx, "freed", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, freed))
	ls, err := pageSource{store: s}.List(ctx)
	require.NoError(t, err)
	require.Len(t, ls, 2)
	assert.Equal(t, elector.Lease{Name: "freed"}, ls[0])
	assert.True(t, held.Is(ls[1]), "%+v", ls[1])

	_, err = pageSource{store: elector.NewMemoryStore()}.List(ctx)
	assert.EqualError(t, err, "leaderd cannot list the leases of a *elector.MemoryStore")
}
