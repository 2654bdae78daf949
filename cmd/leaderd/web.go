package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/fx"

	leaderprom "github.com/leaderaware/leaderaware/contrib/prometheus"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/fxmodule"
	"github.com/leaderaware/leaderaware/statuspage"
)

// leasesTimeout bounds the store reads of one request of the page's JSON.
const leasesTimeout = 5 * time.Second

// webOptions serves HTTP on -http while the app runs (see [site.handler]).
// The graph's elector.Observer, which fxmodule gives every LeaderJob, is
// a leaderprom.Collector, for /metrics.
func webOptions() fx.Option {
	return fx.Options(
		fx.Provide(
			leaderprom.New,
			func(c *leaderprom.Collector) elector.Observer { return c },
		),
		fx.Invoke(serveHTTP),
	)
}

// serveHTTP appends the hooks that listen on o.http when the app starts
// and shut the server down when it stops. Invoked before the jobs are
// built, it starts before them and stops after them; asking for the store,
// it starts after the store is opened and stops before it is closed.
func serveHTTP(lc fx.Lifecycle, o options, log *slog.Logger, store elector.Store, reg *fxmodule.Registry, c *leaderprom.Collector) {
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(c, collectors.NewGoCollector())
	s := &site{
		reg:     reg,
		page:    statuspage.Handler(pageSource{Registry: reg, holder: o.holder, store: store}),
		metrics: promhttp.HandlerFor(metrics, promhttp.HandlerOpts{}),
	}
	srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second}
	var served chan struct{}
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			ln, err := net.Listen("tcp", o.http)
			if err != nil {
				return fmt.Errorf("leaderd: -http: %w", err)
			}
			served = make(chan struct{})
			go func() {
				defer close(served)
				_ = srv.Serve(ln) // http.ErrServerClosed once Shutdown is called
			}()
			log.Info("http listening", "addr", ln.Addr().String(), "page", pageURL(ln.Addr()))
			return nil
		},
		OnStop: func(ctx context.Context) error {
			err := srv.Shutdown(ctx)
			<-served // Serve returns as soon as Shutdown has closed the listener
			return err
		},
	})
}

// pageURL returns the URL of the status page at addr, with localhost for
// an unspecified address.
func pageURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String() + "/"
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

// registry is what the HTTP server needs of the *fxmodule.Registry.
type registry interface {
	Healthy(*http.Request) error
	Ready(*http.Request) error
}

// site is the HTTP server of an instance.
type site struct {
	reg     registry
	page    http.Handler // the status page and its JSON
	metrics http.Handler
}

// handler serves:
//
//   - / the status page (statuspage), which refreshes every second from
//     /leases, its JSON: every lease in the store, this instance's jobs and
//     the handoffs seen through the store;
//   - /metrics the Prometheus metrics of the jobs (leaderprom) and of Go;
//   - /healthz the liveness probe (fxmodule.Registry.Healthy): 503 only
//     while a job's inner Start or Stop overran its timeout;
//   - /readyz the readiness probe (fxmodule.Registry.Ready), never gated on
//     leadership.
func (s *site) handler() http.Handler {
	mux := http.NewServeMux()
	for _, path := range []string{"/{$}", "/page.js", "/leases"} {
		mux.Handle(path, s.page) // the page answers other methods with 405 itself
	}
	mux.Handle("GET /metrics", s.metrics)
	mux.HandleFunc("GET /healthz", probe(s.reg.Healthy))
	mux.HandleFunc("GET /readyz", probe(s.reg.Ready))
	return mux
}

// pageSource is what the status page shows of an instance: the jobs of its
// registry, named by its holder, and every lease of its store, which
// listLeases lists.
type pageSource struct {
	*fxmodule.Registry
	holder string
	store  elector.Store
}

// Holder names this instance on the page.
func (p pageSource) Holder() string { return p.holder }

// List lists every lease of the store, as [pageLeases] gives them.
func (p pageSource) List(ctx context.Context) ([]elector.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, leasesTimeout)
	defer cancel()
	rows, err := listLeases(ctx, p.store)
	if err != nil {
		return nil, err
	}
	return pageLeases(rows), nil
}

// probe serves check as a probe: 200 "ok", or 503 and the error.
func probe(check func(*http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := check(r); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err)
			return
		}
		fmt.Fprintln(w, "ok")
	}
}
