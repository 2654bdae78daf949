package statuspage_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/jobs"
	"github.com/leaderaware/leaderaware/statuspage"
)

// source is a statuspage.Source of fixed snapshots on a store, named
// holder, whose decorated jobs are jobs.
type source struct {
	store  elector.Store
	snaps  []decorator.Snapshot
	holder string
	jobs   map[string]decorator.Job
}

func (s *source) Jobs() []decorator.Snapshot     { return s.snaps }
func (s *source) Store() elector.Store           { return s.store }
func (s *source) Holder() string                 { return s.holder }
func (s *source) Job(lease string) decorator.Job { return s.jobs[lease] }
func (s *source) acquire(t *testing.T, name, holder string) elector.Lease {
	t.Helper()
	l, err := s.store.TryAcquire(t.Context(), name, holder, 1500*time.Millisecond, elector.Lease{})
	require.NoError(t, err)
	return l
}

// get returns the status code, headers and body of a GET of path.
func get(t *testing.T, h http.Handler, method, path string) (int, http.Header, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, rec.Header(), string(body)
}

// status decodes the JSON at path, as a map (to check the keys) and as a
// statuspage.Status.
func status(t *testing.T, h http.Handler, path string) (map[string]any, statuspage.Status) {
	t.Helper()
	code, hdr, body := get(t, h, http.MethodGet, path)
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "application/json", hdr.Get("Content-Type"))
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &raw), body)
	var st statuspage.Status
	require.NoError(t, json.Unmarshal([]byte(body), &st), body)
	return raw, st
}

// TestJSON: the JSON lists every lease of the jobs with its holder, token
// (a string), TTL (a string and seconds) and times, omits the times of a
// free lease, lists this instance's jobs that do not lead a lease as
// waiting for it, and uses snake_case keys.
func TestJSON(t *testing.T) {
	src := &source{store: elector.NewMemoryStore(), holder: "me"}
	mine := src.acquire(t, "mine", "me")
	theirs := src.acquire(t, "theirs", "other")
	src.snaps = []decorator.Snapshot{
		{Job: "*main.A", Lease: "mine", Leading: true, Holder: "me", Token: mine.Token, Since: time.Now(), TrustRemaining: 1200 * time.Millisecond, TrustKnown: true},
		{Job: "*main.B", Lease: "theirs"},
		{Job: "*main.C", Lease: "unheld"},
	}
	h := statuspage.Handler(src)
	raw, st := status(t, h, "/leaders/leases")

	assert.Equal(t, "me", st.Holder)
	assert.Empty(t, st.Error)
	require.Len(t, st.Leases, 3)
	m, th, free := st.Leases[0], st.Leases[1], st.Leases[2]
	assert.Equal(t, "mine", m.Name)
	assert.Equal(t, "me", m.Holder)
	assert.Equal(t, mine.Token, m.Token)
	assert.Empty(t, m.Waiting, "the leader waits for nothing")
	assert.Equal(t, "theirs", th.Name)
	assert.Equal(t, "other", th.Holder)
	assert.Equal(t, theirs.Token, th.Token)
	assert.Equal(t, []statuspage.Candidate{{Job: "*main.B", Holder: "me"}}, th.Waiting)
	assert.Equal(t, statuspage.Lease{Name: "unheld", Free: true, Waiting: []statuspage.Candidate{{Job: "*main.C", Holder: "me"}}}, free)

	leases := raw["leases"].([]any)
	l0 := leases[0].(map[string]any)
	assert.Equal(t, "1.5s", l0["ttl"])
	assert.Equal(t, 1.5, l0["ttl_seconds"])
	assert.IsType(t, "", l0["token"], "tokens are strings: they may not fit a JavaScript number")
	renewed, err := time.Parse(time.RFC3339Nano, l0["renewed"].(string))
	require.NoError(t, err)
	expires, err := time.Parse(time.RFC3339Nano, l0["expires"].(string))
	require.NoError(t, err)
	assert.Equal(t, 1500*time.Millisecond, expires.Sub(renewed))
	assert.NotContains(t, l0, "expired", "a lease within its TTL")
	for _, k := range []string{"renewed", "expires", "holder", "token", "ttl"} {
		assert.NotContains(t, leases[2], k, "a free lease has no %s", k)
	}
	jobs := raw["jobs"].([]any)
	require.Len(t, jobs, 3)
	j0 := jobs[0].(map[string]any)
	assert.Equal(t, "1.2s", j0["trust_remaining"])
	assert.Equal(t, 1.2, j0["trust_remaining_seconds"])
	assert.Equal(t, true, j0["healthy"])
	assert.Contains(t, j0, "since")
	for _, k := range []string{"since", "trust_remaining", "token", "holder", "last_run"} {
		assert.NotContains(t, jobs[1], k, "a waiting job has no %s", k)
	}
	for _, k := range []string{"now", "holder", "leases", "jobs", "handoffs"} {
		assert.Contains(t, raw, k)
	}
	assert.Equal(t, []any{}, raw["handoffs"])
}

// TestExpired: a lease past its expiry, by this instance's clock, is
// marked expired.
func TestExpired(t *testing.T) {
	src := &source{store: elector.NewMemoryStore()}
	src.acquire(t, "gone", "dead")
	src.snaps = []decorator.Snapshot{{Job: "j", Lease: "gone"}}
	h := statuspage.Handler(src)
	_, st := status(t, h, "/leases")
	require.Len(t, st.Leases, 1)
	assert.False(t, st.Leases[0].Expired)
	// Not a sleep for timing logic: the lease's Written is the memory
	// store's wall clock, and the TTL is 1.5 s.
	time.Sleep(1600 * time.Millisecond)
	_, st = status(t, h, "/leases")
	assert.True(t, st.Leases[0].Expired, "%+v", st.Leases[0])
}

// TestHandoffs: changes of a lease's token between two reads are handoffs,
// from the last holder seen to the new one, and so is a release; renewals
// are not; the first read records none.
func TestHandoffs(t *testing.T) {
	ctx := t.Context()
	src := &source{store: elector.NewMemoryStore()}
	a := src.acquire(t, "x", "a")
	src.snaps = []decorator.Snapshot{{Job: "j", Lease: "x"}}
	h := statuspage.Handler(src)
	_, st := status(t, h, "/leases")
	assert.Empty(t, st.Handoffs, "the first read")

	a, err := src.store.Renew(ctx, a, time.Second)
	require.NoError(t, err)
	_, st = status(t, h, "/leases")
	assert.Empty(t, st.Handoffs, "a renewal")

	require.NoError(t, src.store.Release(ctx, a))
	before := time.Now()
	_, st = status(t, h, "/leases")
	require.Len(t, st.Handoffs, 1)
	ho := st.Handoffs[0]
	assert.Equal(t, statuspage.Handoff{At: ho.At, After: ho.After, Lease: "x", From: "a", FromToken: a.Token, Released: true}, ho)
	assert.False(t, ho.At.Before(before), "seen by this read")
	assert.True(t, ho.After.Before(before), "after the read before")

	b := src.acquire(t, "x", "b")
	_, st = status(t, h, "/leases")
	require.Len(t, st.Handoffs, 2)
	assert.Equal(t, statuspage.Handoff{At: st.Handoffs[0].At, After: ho.At, Lease: "x", From: "a", FromToken: a.Token, To: "b", ToToken: b.Token}, st.Handoffs[0], "newest first, from the last holder")

	// b's term ends unseen: the next read sees c's.
	require.NoError(t, src.store.Release(ctx, b))
	c := src.acquire(t, "x", "c")
	_, st = status(t, h, "/leases")
	require.Len(t, st.Handoffs, 3)
	assert.Equal(t, statuspage.Handoff{At: st.Handoffs[0].At, After: st.Handoffs[0].After, Lease: "x", From: "b", FromToken: b.Token, To: "c", ToToken: c.Token}, st.Handoffs[0])
}

// failing is a store whose Get fails.
type failing struct{ elector.Store }

func (failing) Get(context.Context, string) (elector.Lease, error) {
	return elector.Lease{}, errors.New("connection refused")
}

// TestReadError: a store that cannot be read is a 503 that says why and
// still lists the jobs.
func TestReadError(t *testing.T) {
	src := &source{store: failing{elector.NewMemoryStore()}, snaps: []decorator.Snapshot{{Job: "j", Lease: "x"}}}
	code, _, body := get(t, statuspage.Handler(src), http.MethodGet, "/leases")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	var st statuspage.Status
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	assert.Equal(t, `statuspage: read lease "x": connection refused`, st.Error)
	require.Len(t, st.Jobs, 1)
	require.Len(t, st.Leases, 1, "the jobs' leases, unknown")
}

// lister is a Source that lists its leases itself.
type lister struct {
	source
	leases []elector.Lease
}

func (l *lister) List(context.Context) ([]elector.Lease, error) { return l.leases, nil }

// TestLister: a Source with List shows the leases it lists, by name, and
// those of its jobs that it does not list.
func TestLister(t *testing.T) {
	src := &lister{
		source: source{store: failing{}, snaps: []decorator.Snapshot{{Job: "j", Lease: "b"}}},
		leases: []elector.Lease{{Name: "c", Holder: "h", Token: 7}, {Name: "a"}},
	}
	_, st := status(t, statuspage.Handler(src), "/leases")
	require.Empty(t, st.Error)
	names := []string{}
	for _, l := range st.Leases {
		names = append(names, l.Name)
	}
	assert.Equal(t, []string{"a", "b", "c"}, names)
	assert.True(t, st.Leases[0].Free)
	assert.Equal(t, uint64(7), st.Leases[2].Token)
}

// fakeStatus is a decorated job: its Healthy fails with err, and it wraps
// inner.
type fakeStatus struct {
	decorator.Job
	err   error
	inner decorator.Job
}

func (f fakeStatus) Leading() bool                { return false }
func (f fakeStatus) Snapshot() decorator.Snapshot { return decorator.Snapshot{} }
func (f fakeStatus) Healthy(*http.Request) error  { return f.err }
func (f fakeStatus) Unwrap() decorator.Job        { return f.inner }

// reporting is a job with a LastRun.
type reporting struct {
	decorator.Job
	r jobs.RunReport
}

func (r reporting) LastRun() jobs.RunReport { return r.r }

// TestJobHealthAndLastRun: with Job(lease), each job's health is its
// decorated job's Healthy, and its last run the LastRun of the job it
// wraps.
func TestJobHealthAndLastRun(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)
	src := &source{
		store: elector.NewMemoryStore(),
		snaps: []decorator.Snapshot{{Job: "j", Lease: "sick"}, {Job: "k", Lease: "well"}},
		jobs: map[string]decorator.Job{
			"sick": fakeStatus{err: errors.New("inner Stop overran")},
			"well": fakeStatus{inner: reporting{r: jobs.RunReport{Started: t0, Ended: t0.Add(250 * time.Millisecond), Err: errors.New("boom"), ErrAt: t0.Add(-time.Minute)}}},
		},
	}
	raw, st := status(t, statuspage.Handler(src), "/leases")
	require.Len(t, st.Jobs, 2)
	assert.False(t, st.Jobs[0].Healthy)
	assert.Equal(t, "inner Stop overran", st.Jobs[0].Health)
	assert.Nil(t, st.Jobs[0].LastRun, "no LastRun")
	assert.True(t, st.Jobs[1].Healthy)
	last := raw["jobs"].([]any)[1].(map[string]any)["last_run"]
	assert.Equal(t, map[string]any{
		"started": "2026-12-01T22:00:00Z", "ended": "2026-12-01T22:00:00.25Z",
		"duration": "250ms", "duration_seconds": 0.25,
		"error": "boom", "error_at": "2026-12-01T21:59:00Z",
	}, last)
}

// TestOverranWithoutJob: without Job(lease), a snapshot's Overran makes
// the job unhealthy.
func TestOverranWithoutJob(t *testing.T) {
	src := &lister{source: source{snaps: []decorator.Snapshot{{Job: "j", Lease: "x", Overran: "inner Start"}}}}
	_, st := status(t, statuspage.Handler(src), "/leases")
	require.Len(t, st.Jobs, 1)
	assert.False(t, st.Jobs[0].Healthy)
	assert.Equal(t, "inner Start overran its timeout", st.Jobs[0].Health)
}

// TestReadOnly: only GET and HEAD are served; every other method is a
// 405 that changes nothing.
func TestReadOnly(t *testing.T) {
	src := &source{store: elector.NewMemoryStore(), snaps: []decorator.Snapshot{{Job: "j", Lease: "x"}}}
	h := statuspage.Handler(src)
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions} {
		for _, p := range []string{"/", "/leases", "/page.js"} {
			code, hdr, _ := get(t, h, m, p)
			assert.Equal(t, http.StatusMethodNotAllowed, code, "%s %s", m, p)
			assert.Equal(t, "GET, HEAD", hdr.Get("Allow"))
		}
	}
	code, _, body := get(t, h, http.MethodHead, "/leases")
	assert.Equal(t, http.StatusOK, code)
	_ = body
	code, _, _ = get(t, h, http.MethodGet, "/leaders/other")
	assert.Equal(t, http.StatusNotFound, code)
	_, err := src.store.Get(t.Context(), "x")
	assert.ErrorIs(t, err, elector.ErrNoLease, "nothing was acquired")
}

// TestEscaping: a lease name and holder that are HTML reach the JSON
// escaped, and the page puts values in as text only; it runs only its own
// script.
func TestEscaping(t *testing.T) {
	const name, holder = `<script>alert(1)</script>`, `<img src=x onerror=alert(2)>`
	src := &source{store: elector.NewMemoryStore()}
	src.acquire(t, name, holder)
	src.snaps = []decorator.Snapshot{{Job: "j", Lease: name}}
	h := statuspage.Handler(src)
	_, _, body := get(t, h, http.MethodGet, "/leases")
	assert.NotContains(t, body, "<", "the JSON escapes < (as \\u003c)")
	_, st := status(t, h, "/leases")
	require.Len(t, st.Leases, 1)
	assert.Equal(t, name, st.Leases[0].Name)
	assert.Equal(t, holder, st.Leases[0].Holder)

	code, hdr, page := get(t, h, http.MethodGet, "/leaders/")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "text/html; charset=utf-8", hdr.Get("Content-Type"))
	assert.Contains(t, hdr.Get("Content-Security-Policy"), "script-src 'self';")
	assert.Equal(t, "nosniff", hdr.Get("X-Content-Type-Options"))
	assert.NotContains(t, page, "alert")
	assert.NotRegexp(t, `(?i)(src|href|url)\s*[=(]\s*["']?(https?:)?//`, page, "the page loads nothing from elsewhere")
	_, hdr, js := get(t, h, http.MethodGet, "/leaders/page.js")
	assert.Equal(t, "text/javascript; charset=utf-8", hdr.Get("Content-Type"))
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
		assert.False(t, strings.Contains(js, sink), "page.js uses %s", sink)
	}
}

// TestNilSource: a nil Source is a 503 that says so.
func TestNilSource(t *testing.T) {
	code, _, body := get(t, statuspage.Handler(nil), http.MethodGet, "/leases")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, `"error":"statuspage: Handler(nil): the page needs a Source`)
}
