package webhookretry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/leadertest"
	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/webhookretry"
	"github.com/leaderaware/leaderaware/elector"
)

var (
	secret = []byte("whsec_test")
	t0     = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
)

// request is what the receiver saw.
type request struct {
	body        string
	signatureOK bool
	key         string
	attempt     string
	contentType string
}

// receiver is a webhook endpoint: it checks the signature of every
// request, records it, and answers with respond(n) for the nth request
// (1-based).
type receiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	reqs    []request
	respond func(n int, w http.ResponseWriter, r *http.Request)
}

func newReceiver(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	rc := &receiver{respond: respond}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		assert.NoError(t, err)
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, request{
			body:        string(body),
			signatureOK: validSignature(secret, body, r.Header.Get("X-Signature")),
			key:         r.Header.Get("Idempotency-Key"),
			attempt:     r.Header.Get("Webhook-Attempt"),
			contentType: r.Header.Get("Content-Type"),
		})
		n := len(rc.reqs)
		rc.mu.Unlock()
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		rc.respond(n, w, r)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.reqs...)
}

func status(code int) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
}

type fixture struct {
	outbox   *webhookretry.Outbox
	clock    *leadertest.Clock
	counting *leadertest.CountingStore
	store    elector.Store
}

func setup(t *testing.T, b leadertest.Backend, cfg webhookretry.Config) fixture {
	t.Helper()
	st := b.Open(t)
	f := fixture{clock: leadertest.NewClock(t0), counting: &leadertest.CountingStore{FencedStore: st}, store: st}
	cfg.Secret = secret
	cfg.Now = f.clock.Now
	if cfg.BaseBackoff == 0 {
		cfg.BaseBackoff = time.Minute
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	o, err := webhookretry.New(t.Context(), f.counting, cfg)
	require.NoError(t, err)
	webhookretry.SetRand(o.Worker(), func() float64 { return 0.5 })
	f.outbox = o
	return f
}

func (f fixture) enqueue(t *testing.T, url, payload string) int64 {
	t.Helper()
	id, err := f.outbox.Enqueue(t.Context(), url, []byte(payload)) // no term: any replica may enqueue
	require.NoError(t, err)
	return id
}

func (f fixture) get(t *testing.T, id int64) webhookretry.Delivery {
	t.Helper()
	d, err := f.outbox.Get(t.Context(), id)
	require.NoError(t, err)
	return d
}

func (f fixture) deliver(t *testing.T, ctx context.Context, want int) {
	t.Helper()
	n, err := f.outbox.Worker().Deliver(ctx)
	require.NoError(t, err)
	require.Equal(t, want, n, "attempted deliveries")
}

func TestDeliverSucceeds(t *testing.T) { leadertest.Run(t, testDeliverSucceeds) }

func testDeliverSucceeds(t *testing.T, b leadertest.Backend) {
	rc := newReceiver(t, status(http.StatusNoContent))
	f := setup(t, b, webhookretry.Config{})
	id := f.enqueue(t, rc.srv.URL+"/hook", `{"event":"paid","id":42}`)
	ctx, l := leadertest.Lead(t, f.store, "webhookretry", "me")
	f.clock.Advance(time.Second)

	f.deliver(t, ctx, 1)
	d := f.get(t, id)
	assert.Equal(t, webhookretry.StatusDelivered, d.Status)
	assert.Equal(t, 1, d.Attempts)
	assert.Equal(t, http.StatusNoContent, d.LastStatusCode)
	assert.Empty(t, d.LastError)
	assert.True(t, d.DeliveredAt.Equal(t0.Add(time.Second)))
	assert.True(t, d.CreatedAt.Equal(t0))
	assert.Equal(t, l.Token, d.ClaimToken)
	assert.True(t, d.ClaimedUntil.IsZero())
	assert.NotEmpty(t, d.IdempotencyKey)

	assert.Equal(t, []request{{
		body:        `{"event":"paid","id":42}`,
		signatureOK: true,
		key:         d.IdempotencyKey,
		attempt:     "1",
		contentType: "application/json",
	}}, rc.requests())
	assert.Equal(t, int64(3), f.counting.Committed(), "a fenced claim, a fenced result, a claim that found nothing")

	f.deliver(t, ctx, 0)
	assert.Len(t, rc.requests(), 1, "delivered twice")
}

func TestDeliverRetriesWithBackoffAndSameKey(t *testing.T) {
	leadertest.Run(t, testDeliverRetriesWithBackoffAndSameKey)
}

func testDeliverRetriesWithBackoffAndSameKey(t *testing.T, b leadertest.Backend) {
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n < 3 {
			http.Error(w, "try later", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	f := setup(t, b, webhookretry.Config{BaseBackoff: time.Minute})
	id := f.enqueue(t, rc.srv.URL, `{"n":1}`)
	ctx, _ := leadertest.Lead(t, f.store, "webhookretry", "me")

	f.deliver(t, ctx, 1)
	d := f.get(t, id)
	assert.Equal(t, webhookretry.StatusPending, d.Status)
	assert.Equal(t, 1, d.Attempts)
	assert.Equal(t, http.StatusInternalServerError, d.LastStatusCode)
	assert.Equal(t, "POST "+rc.srv.URL+": HTTP status 500 Internal Server Error", d.LastError)
	// Backoff after 1 failure: 1m, jittered into [30s, 1m]; r = 0.5 gives 45s.
	assert.True(t, d.NextAttemptAt.Equal(t0.Add(45*time.Second)), "next attempt at %v", d.NextAttemptAt)

	f.clock.Advance(44 * time.Second)
	f.deliver(t, ctx, 0) // not due yet
	assert.Len(t, rc.requests(), 1)

	f.clock.Advance(time.Second)
	f.deliver(t, ctx, 1)
	d = f.get(t, id)
	assert.Equal(t, 2, d.Attempts)
	// After 2 failures: 2m, jittered into [1m, 2m]; r = 0.5 gives 90s.
	assert.True(t, d.NextAttemptAt.Equal(t0.Add(45*time.Second+90*time.Second)), "next attempt at %v", d.NextAttemptAt)

	f.clock.Advance(90 * time.Second)
	f.deliver(t, ctx, 1)
	d = f.get(t, id)
	assert.Equal(t, webhookretry.StatusDelivered, d.Status)
	assert.Equal(t, 3, d.Attempts)

	reqs := rc.requests()
	require.Len(t, reqs, 3)
	for i, r := range reqs {
		assert.Equal(t, d.IdempotencyKey, r.key, "attempt %d", i+1)
		assert.True(t, r.signatureOK, "attempt %d", i+1)
		assert.Equal(t, `{"n":1}`, r.body)
		assert.Equal(t, []string{"1", "2", "3"}[i], r.attempt)
	}
}

func TestDeadLetterAfterMaxAttempts(t *testing.T) { leadertest.Run(t, testDeadLetterAfterMaxAttempts) }

func testDeadLetterAfterMaxAttempts(t *testing.T, b leadertest.Backend) {
	rc := newReceiver(t, status(http.StatusInternalServerError))
	f := setup(t, b, webhookretry.Config{MaxAttempts: 3, BaseBackoff: time.Minute, MaxBackoff: 10 * time.Minute})
	id := f.enqueue(t, rc.srv.URL, `{}`)
	other := f.enqueue(t, rc.srv.URL, `{}`)
	ctx, _ := leadertest.Lead(t, f.store, "webhookretry", "me")
	for range 3 {
		f.deliver(t, ctx, 2)
		f.clock.Advance(10 * time.Minute)
	}
	f.deliver(t, ctx, 0)
	assert.Len(t, rc.requests(), 6)
	for _, id := range []int64{id, other} {
		d := f.get(t, id)
		assert.Equal(t, webhookretry.StatusDead, d.Status)
		assert.Equal(t, 3, d.Attempts)
		assert.Contains(t, d.LastError, "HTTP status 500")
	}
	dead, err := f.outbox.List(t.Context(), webhookretry.StatusDead, 0)
	require.NoError(t, err)
	require.Len(t, dead, 2)
	assert.Equal(t, id, dead[0].ID)
	pending, err := f.outbox.List(t.Context(), webhookretry.StatusPending, 0)
	require.NoError(t, err)
	assert.Empty(t, pending)
}

func TestTimeoutIsAFailedAttempt(t *testing.T) { leadertest.Run(t, testTimeoutIsAFailedAttempt) }

func testTimeoutIsAFailedAttempt(t *testing.T, b leadertest.Backend) {
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // hang until the worker gives up
	})
	f := setup(t, b, webhookretry.Config{Timeout: 100 * time.Millisecond})
	id := f.enqueue(t, rc.srv.URL, `{}`)
	ctx, _ := leadertest.Lead(t, f.store, "webhookretry", "me")
	start := time.Now()
	f.deliver(t, ctx, 1)
	assert.Less(t, time.Since(start), 5*time.Second, "the timeout did not apply")
	d := f.get(t, id)
	assert.Equal(t, webhookretry.StatusPending, d.Status)
	assert.Equal(t, 1, d.Attempts)
	assert.Zero(t, d.LastStatusCode)
	assert.Contains(t, d.LastError, rc.srv.URL)
	assert.Contains(t, d.LastError, "context deadline exceeded")
}

func TestRedirectIsNotFollowed(t *testing.T) { leadertest.Run(t, testRedirectIsNotFollowed) }

func testRedirectIsNotFollowed(t *testing.T, b leadertest.Backend) {
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	})
	f := setup(t, b, webhookretry.Config{})
	id := f.enqueue(t, rc.srv.URL, `{}`)
	ctx, _ := leadertest.Lead(t, f.store, "webhookretry", "me")
	f.deliver(t, ctx, 1)
	d := f.get(t, id)
	assert.Equal(t, webhookretry.StatusPending, d.Status)
	assert.Equal(t, http.StatusFound, d.LastStatusCode)
	assert.Len(t, rc.requests(), 1)
}

func TestDeposedLeaderSendsNothing(t *testing.T) { leadertest.Run(t, testDeposedLeaderSendsNothing) }

func testDeposedLeaderSendsNothing(t *testing.T, b leadertest.Backend) {
	rc := newReceiver(t, status(http.StatusOK))
	f := setup(t, b, webhookretry.Config{})
	id := f.enqueue(t, rc.srv.URL, `{}`)
	oldCtx, l := leadertest.Lead(t, f.store, "webhookretry", "me")
	newCtx, _ := leadertest.Depose(t, f.store, l)

	n, err := f.outbox.Worker().Deliver(oldCtx)
	leadertest.RequireRefused(t, err)
	assert.Zero(t, n)
	assert.Empty(t, rc.requests())
	d := f.get(t, id)
	assert.Equal(t, webhookretry.StatusPending, d.Status)
	assert.Zero(t, d.Attempts, "a refused claim counted an attempt")

	f.deliver(t, newCtx, 1)
	assert.Len(t, rc.requests(), 1)
}

func TestDeliverWithoutTerm(t *testing.T) { leadertest.Run(t, testDeliverWithoutTerm) }

func testDeliverWithoutTerm(t *testing.T, b leadertest.Backend) {
	f := setup(t, b, webhookretry.Config{})
	f.enqueue(t, "http://127.0.0.1:1/never", `{}`)
	_, err := f.outbox.Worker().Deliver(t.Context())
	require.ErrorIs(t, err, elector.ErrNoTerm)
	assert.Zero(t, f.counting.Calls())
}

// deposer hands the lease to a new holder while the old leader's request
// is in flight (from the receiver's goroutine). The old leader does not
// release it: the new holder takes over the lease it observed, as a
// candidate does once it has watched a paused leader's lease for its TTL.
type deposer struct {
	mu     sync.Mutex
	newCtx context.Context
	err    error
}

func (d *deposer) depose(t *testing.T, st elector.Store, old elector.Lease) {
	d.mu.Lock()
	defer d.mu.Unlock()
	observed, err := st.Get(context.Background(), old.Name)
	if d.err = err; err != nil {
		return
	}
	l, err := st.TryAcquire(context.Background(), old.Name, "usurper", time.Minute, observed)
	if d.err = err; err != nil {
		return
	}
	d.newCtx = elector.ContextWithTerm(t.Context(), leadertest.NewTerm(l))
}

// result returns the new holder's context.
func (d *deposer) result(t *testing.T) context.Context {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	require.NoError(t, d.err)
	require.NotNil(t, d.newCtx, "not deposed")
	return d.newCtx
}

func TestNeverSentTwiceAtTheSameTime(t *testing.T) {
	leadertest.Run(t, testNeverSentTwiceAtTheSameTime)
}

func testNeverSentTwiceAtTheSameTime(t *testing.T, b leadertest.Backend) {
	f := setup(t, b, webhookretry.Config{Timeout: 2 * time.Second, ClaimTTL: 5 * time.Second})
	oldCtx, oldLease := leadertest.Lead(t, f.store, "webhookretry", "me")
	var dep deposer
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 { // the old leader is deposed while its request is in flight
			dep.depose(t, f.store, oldLease)
		}
		w.WriteHeader(http.StatusOK)
	})
	id := f.enqueue(t, rc.srv.URL, `{"once":true}`)

	n, err := f.outbox.Worker().Deliver(oldCtx)
	newCtx := dep.result(t)
	leadertest.RequireRefused(t, err) // its result is refused
	assert.Equal(t, 1, n)
	d := f.get(t, id)
	assert.Equal(t, webhookretry.StatusInFlight, d.Status)
	assert.Equal(t, oldLease.Token, d.ClaimToken)
	assert.True(t, d.ClaimedUntil.Equal(t0.Add(5*time.Second)))

	// The new leader must not send it while the old claim may still be in use.
	f.clock.Advance(5*time.Second - time.Nanosecond)
	f.deliver(t, newCtx, 0)
	assert.Len(t, rc.requests(), 1)

	// Once the claim has expired, the new leader retries with the same key.
	f.clock.Advance(time.Nanosecond)
	f.deliver(t, newCtx, 1)
	d = f.get(t, id)
	assert.Equal(t, webhookretry.StatusDelivered, d.Status)
	assert.Equal(t, 2, d.Attempts)
	reqs := rc.requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, reqs[0].key, reqs[1].key)
	assert.Equal(t, "2", reqs[1].attempt)
}

func TestExpiredClaimOfLastAttemptIsDeadLettered(t *testing.T) {
	leadertest.Run(t, testExpiredClaimOfLastAttemptIsDeadLettered)
}

func testExpiredClaimOfLastAttemptIsDeadLettered(t *testing.T, b leadertest.Backend) {
	f := setup(t, b, webhookretry.Config{MaxAttempts: 1, Timeout: time.Second, ClaimTTL: 2 * time.Second})
	oldCtx, oldLease := leadertest.Lead(t, f.store, "webhookretry", "me")
	var dep deposer
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		dep.depose(t, f.store, oldLease)
		w.WriteHeader(http.StatusOK)
	})
	id := f.enqueue(t, rc.srv.URL, `{}`)
	_, err := f.outbox.Worker().Deliver(oldCtx)
	newCtx := dep.result(t)
	leadertest.RequireRefused(t, err)

	f.clock.Advance(2 * time.Second)
	f.deliver(t, newCtx, 0)
	d := f.get(t, id)
	assert.Equal(t, webhookretry.StatusDead, d.Status)
	assert.Equal(t, "claim of attempt 1 expired; its outcome is unknown", d.LastError)
	assert.Len(t, rc.requests(), 1)
}

func TestBatchSize(t *testing.T) { leadertest.Run(t, testBatchSize) }

func testBatchSize(t *testing.T, b leadertest.Backend) {
	rc := newReceiver(t, status(http.StatusOK))
	f := setup(t, b, webhookretry.Config{BatchSize: 2})
	for range 3 {
		f.enqueue(t, rc.srv.URL, `{}`)
	}
	ctx, _ := leadertest.Lead(t, f.store, "webhookretry", "me")
	f.deliver(t, ctx, 2)
	f.deliver(t, ctx, 1)
	f.deliver(t, ctx, 0)
}

func TestWorkerDeliversBetweenStartAndStop(t *testing.T) {
	leadertest.Run(t, testWorkerDeliversBetweenStartAndStop)
}

func testWorkerDeliversBetweenStartAndStop(t *testing.T, b leadertest.Backend) {
	rc := newReceiver(t, status(http.StatusOK))
	f := setup(t, b, webhookretry.Config{Interval: 10 * time.Millisecond})
	ctx, _ := leadertest.Lead(t, f.store, "webhookretry", "me")
	w := f.outbox.Worker()
	require.NoError(t, w.Start(ctx))
	for range 3 {
		f.enqueue(t, rc.srv.URL, `{}`)
	}
	require.Eventually(t, func() bool {
		d, err := f.outbox.List(t.Context(), webhookretry.StatusDelivered, 0)
		return err == nil && len(d) == 3
	}, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, w.Stop(t.Context()))

	require.NoError(t, w.Start(ctx), "restart")
	f.enqueue(t, rc.srv.URL, `{}`)
	require.Eventually(t, func() bool { return len(rc.requests()) == 4 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, w.Stop(t.Context()))
}

func TestStopDuringRequestRecordsTheAttempt(t *testing.T) {
	leadertest.Run(t, testStopDuringRequestRecordsTheAttempt)
}

func testStopDuringRequestRecordsTheAttempt(t *testing.T, b leadertest.Backend) {
	arrived := make(chan struct{}, 1)
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	})
	f := setup(t, b, webhookretry.Config{Timeout: time.Minute})
	id := f.enqueue(t, rc.srv.URL, `{}`)
	ctx, _ := leadertest.Lead(t, f.store, "webhookretry", "me")
	w := f.outbox.Worker()
	require.NoError(t, w.Start(ctx))
	<-arrived
	stopCtx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.NoError(t, w.Stop(stopCtx))
	d := f.get(t, id)
	assert.Equal(t, webhookretry.StatusPending, d.Status, "the claim was left in flight")
	assert.Equal(t, 1, d.Attempts)
	assert.Contains(t, d.LastError, "context canceled")
}

func TestEnqueueBadURL(t *testing.T) { leadertest.Run(t, testEnqueueBadURL) }

func testEnqueueBadURL(t *testing.T, b leadertest.Backend) {
	f := setup(t, b, webhookretry.Config{})
	for _, u := range []string{"", "example.com/hook", "ftp://example.com/hook", "http://"} {
		_, err := f.outbox.Enqueue(t.Context(), u, nil)
		assert.ErrorContains(t, err, `"`+u+`"`)
	}
	_, err := f.outbox.Get(t.Context(), 99)
	assert.ErrorContains(t, err, "delivery 99: delivery not found")
}

func TestNewBadConfig(t *testing.T) {
	st := leadertest.OpenStore(t)
	for _, tt := range []struct {
		cfg  webhookretry.Config
		want string
	}{
		{webhookretry.Config{}, "webhookretry: empty Secret"},
		{webhookretry.Config{Secret: secret, Interval: -1}, "webhookretry: Interval -1ns is negative"},
		{webhookretry.Config{Secret: secret, Jitter: 2}, "webhookretry: Jitter 2 is not in [0, 1)"},
		{webhookretry.Config{Secret: secret, Timeout: -time.Second}, "webhookretry: Timeout -1s is negative"},
		{webhookretry.Config{Secret: secret, Timeout: time.Minute, ClaimTTL: time.Minute}, "webhookretry: ClaimTTL 1m0s must exceed Timeout 1m0s"},
		{webhookretry.Config{Secret: secret, MaxAttempts: -1}, "webhookretry: MaxAttempts -1 is negative"},
		{webhookretry.Config{Secret: secret, BaseBackoff: time.Hour, MaxBackoff: time.Minute}, "webhookretry: MaxBackoff 1m0s is below BaseBackoff 1h0m0s"},
		{webhookretry.Config{Secret: secret, BatchSize: -1}, "webhookretry: BatchSize -1 is negative"},
	} {
		_, err := webhookretry.New(t.Context(), st, tt.cfg)
		assert.EqualError(t, err, tt.want)
	}
	_, err := webhookretry.New(t.Context(), nil, webhookretry.Config{Secret: secret})
	assert.EqualError(t, err, "webhookretry: nil store")
}

// TestOnPass: every periodic worker pass reports how many deliveries it
// attempted to OnPass (0 once none is due), with the term in ctx.
func TestOnPass(t *testing.T) { leadertest.Run(t, testOnPass) }

func testOnPass(t *testing.T, b leadertest.Backend) {
	rc := newReceiver(t, status(http.StatusOK))
	type pass struct {
		token     uint64
		attempted int
	}
	passes := make(chan pass, 100)
	f := setup(t, b, webhookretry.Config{
		Interval: 10 * time.Millisecond,
		OnPass: func(ctx context.Context, n int) {
			l, _ := elector.LeaseFromContext(ctx)
			passes <- pass{l.Token, n}
		},
	})
	f.enqueue(t, rc.srv.URL, `{}`)
	f.enqueue(t, rc.srv.URL, `{}`)
	ctx, l := leadertest.Lead(t, f.store, "webhookretry", "me")
	w := f.outbox.Worker()
	require.NoError(t, w.Start(ctx))
	assert.Equal(t, pass{l.Token, 2}, <-passes)
	assert.Equal(t, pass{l.Token, 0}, <-passes)
	require.NoError(t, w.Stop(t.Context()))
}
