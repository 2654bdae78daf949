package apiservertest_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/k8slease"
)

var benchLeases = flag.Int("bench.leases", 1000, "leases held in BenchmarkSideBySide/held")

// The timings of BenchmarkSideBySide: the defaults of both electors
// (client-go's as its documentation recommends: 15s, 10s, 2s).
const (
	benchTTL        = 15 * time.Second
	benchRenewDL    = 10 * time.Second
	benchRetry      = 2 * time.Second
	benchHandoffs   = 5
	benchIdleWindow = 10 * time.Second
)

// counting is an http.RoundTripper that counts requests.
type counting struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

// countingConfig is the server's config with a client of its own whose
// requests n counts.
func countingConfig(n *atomic.Int64) *rest.Config {
	cfg := rest.CopyConfig(server.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return counting{rt, n} }
	return cfg
}

// BenchmarkSideBySide measures k8slease and client-go's leader election
// (LeaseLock) on the same API server, in one run, at their default timings
// (TTL/LeaseDuration 15s, RetryPeriod 2s): the graceful handoff, the crash
// failover, the API requests of an idle candidate, and those of a replica
// that holds -bench.leases leases. Run it with -benchtime 1x.
func BenchmarkSideBySide(b *testing.B) {
	ns := newNamespaceB(b)
	for b.Loop() {
		b.Run("handoff", func(b *testing.B) {
			ours, cg := make([]time.Duration, 0, benchHandoffs), make([]time.Duration, 0, benchHandoffs)
			for i := range benchHandoffs {
				ours = append(ours, oursHandoff(b, ns, fmt.Sprintf("handoff-la-%d", i), false))
				cg = append(cg, clientGoHandoff(b, ns, fmt.Sprintf("handoff-cg-%d", i), true))
			}
			report(b, ours, "ours-ms")
			report(b, cg, "client-go-ms")
		})
		b.Run("crash", func(b *testing.B) {
			var ours, cg time.Duration
			var wg sync.WaitGroup
			wg.Go(func() { ours = oursHandoff(b, ns, "crash-la", true) })
			wg.Go(func() { cg = clientGoHandoff(b, ns, "crash-cg", false) })
			wg.Wait()
			report(b, []time.Duration{ours}, "ours-ms")
			report(b, []time.Duration{cg}, "client-go-ms")
		})
		b.Run("idle", func(b *testing.B) {
			ours, cg := idleRequests(b, ns)
			b.ReportMetric(ours, "ours-req/s")
			b.ReportMetric(cg, "client-go-req/s")
		})
		b.Run("held", func(b *testing.B) {
			ours, cg := heldRequests(b, ns, *benchLeases)
			b.ReportMetric(ours, "ours-req/s")
			b.ReportMetric(cg, "client-go-req/s")
		})
	}
}

func newNamespaceB(b *testing.B) string {
	name := fmt.Sprintf("bench-%d", time.Now().UnixNano()%1e9)
	_, err := admin(b).CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(b, err)
	return name
}

func report(b *testing.B, ds []time.Duration, unit string) {
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, unit)
	b.ReportMetric(float64(ds[len(ds)-1].Microseconds())/1000, "max-"+unit)
	b.Logf("%s: %v", unit, ds)
}

// oursHandoff returns how long after the leader resigned (or crashed) the
// candidate leads, on two k8slease stores.
func oursHandoff(b *testing.B, ns, name string, crash bool) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	newE := func(holder string) *elector.LeaseElector {
		s, err := k8slease.New(admin(b), ns)
		require.NoError(b, err)
		b.Cleanup(func() { _ = s.Close() })
		e, err := elector.New(s, name, elector.Config{Holder: holder, TTL: benchTTL})
		require.NoError(b, err)
		return e
	}
	ta, err := newE("a").Campaign(ctx)
	require.NoError(b, err)
	won := make(chan time.Time, 1)
	go func() {
		tb, err := newE("b").Campaign(ctx)
		if err == nil {
			won <- time.Now()
			_ = tb.Resign(context.Background())
		}
		close(won)
	}()
	time.Sleep(time.Second) // b waits
	start := time.Now()
	if crash {
		ta.Abandon()
	} else {
		require.NoError(b, ta.Resign(ctx))
	}
	at, ok := <-won
	require.True(b, ok, "b did not lead")
	return at.Sub(start)
}

// clientGoHandoff returns how long after the leader stopped with
// ReleaseOnCancel (or without: a crash) the other client-go elector leads.
func clientGoHandoff(b *testing.B, ns, name string, release bool) time.Duration {
	start := func(id string) (<-chan time.Time, context.CancelFunc, <-chan struct{}) {
		led := make(chan time.Time, 1)
		ctx, cancel := context.WithCancel(context.Background())
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Client: admin(b).CoordinationV1(), LockConfig: resourcelock.ResourceLockConfig{Identity: id}},
			LeaseDuration: benchTTL, RenewDeadline: benchRenewDL, RetryPeriod: benchRetry, ReleaseOnCancel: release,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { led <- time.Now() },
				OnStoppedLeading: func() {},
			},
		})
		require.NoError(b, err)
		done := make(chan struct{})
		go func() { defer close(done); le.Run(ctx) }()
		return led, cancel, done
	}
	ledA, cancelA, doneA := start("a")
	<-ledA
	ledB, cancelB, doneB := start("b")
	defer func() { cancelB(); <-doneB }()
	time.Sleep(time.Second) // b waits
	t0 := time.Now()
	cancelA()
	<-doneA
	select {
	case at := <-ledB:
		return at.Sub(t0)
	case <-time.After(time.Minute):
		b.Fatal("client-go b did not lead within a minute")
		return 0
	}
}

// idleRequests returns the API requests per second of one idle candidate
// of each kind while a holder of its kind holds the lease.
func idleRequests(b *testing.B, ns string) (ours, cg float64) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	holder, err := k8slease.New(admin(b), ns)
	require.NoError(b, err)
	defer holder.Close()
	e, err := elector.New(holder, "idle-la", elector.Config{Holder: "a", TTL: benchTTL})
	require.NoError(b, err)
	term, err := e.Campaign(ctx)
	require.NoError(b, err)
	defer func() { _ = term.Resign(context.Background()) }()
	var nOurs atomic.Int64
	cand, err := k8slease.New(client(b, countingConfig(&nOurs)), ns)
	require.NoError(b, err)
	defer cand.Close()
	ec, err := elector.New(cand, "idle-la", elector.Config{Holder: "b", TTL: benchTTL})
	require.NoError(b, err)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { _, _ = ec.Campaign(ctx) })

	var nCG atomic.Int64
	runCG := func(id string, c *rest.Config) {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Name: "idle-cg", Namespace: ns},
				Client: client(b, c).CoordinationV1(), LockConfig: resourcelock.ResourceLockConfig{Identity: id}},
			LeaseDuration: benchTTL, RenewDeadline: benchRenewDL, RetryPeriod: benchRetry, ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {}},
		})
		require.NoError(b, err)
		wg.Go(func() { le.Run(ctx) })
	}
	runCG("a", server.Config)
	time.Sleep(time.Second) // a leads
	runCG("b", countingConfig(&nCG))
	time.Sleep(2 * time.Second) // both candidates started
	o0, c0 := nOurs.Load(), nCG.Load()
	time.Sleep(benchIdleWindow)
	return float64(nOurs.Load()-o0) / benchIdleWindow.Seconds(), float64(nCG.Load()-c0) / benchIdleWindow.Seconds()
}

// heldRequests returns the API requests per second of a replica that holds
// n leases: with k8slease, one store; with client-go, one elector per
// lease.
func heldRequests(b *testing.B, ns string, n int) (ours, cg float64) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	var nOurs atomic.Int64
	s, err := k8slease.New(client(b, countingConfig(&nOurs)), ns)
	require.NoError(b, err)
	defer s.Close()
	var terms []elector.Term
	for i := range n {
		e, err := elector.New(s, fmt.Sprintf("held-la-%d", i), elector.Config{Holder: "a", TTL: benchTTL})
		require.NoError(b, err)
		term, err := e.Campaign(ctx)
		require.NoError(b, err)
		terms = append(terms, term)
	}
	defer func() {
		for _, t := range terms {
			t.Abandon()
		}
	}()

	var nCG atomic.Int64
	var leading atomic.Int64
	c := client(b, countingConfig(&nCG)).CoordinationV1()
	for i := range n {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Name: fmt.Sprintf("held-cg-%d", i), Namespace: ns},
				Client: c, LockConfig: resourcelock.ResourceLockConfig{Identity: "a"}},
			LeaseDuration: benchTTL, RenewDeadline: benchRenewDL, RetryPeriod: benchRetry,
			Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) { leading.Add(1) }, OnStoppedLeading: func() {}},
		})
		require.NoError(b, err)
		wg.Go(func() { le.Run(ctx) })
	}
	require.Eventually(b, func() bool { return leading.Load() == int64(n) }, time.Minute, 100*time.Millisecond, "client-go electors lead")
	time.Sleep(benchRetry)
	o0, c0 := nOurs.Load(), nCG.Load()
	const window = 3 * benchTTL / 2
	time.Sleep(window)
	return float64(nOurs.Load()-o0) / window.Seconds(), float64(nCG.Load()-c0) / window.Seconds()
}
