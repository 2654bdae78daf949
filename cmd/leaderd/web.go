package main

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/fx"

	leaderprom "github.com/leaderaware/leaderaware/contrib/prometheus"
	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/fxmodule"
)

// pageHTML is the status page: it fetches /leases every 2 s and renders it.
//
//go:embed page.html
var pageHTML []byte

// pageCSP lets the page run its inline script and style and fetch from its
// own origin, and nothing else: it has no external assets.
const pageCSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:"

// leasesTimeout bounds the store reads of one /leases request.
const leasesTimeout = 5 * time.Second

// webOptions serves HTTP on -http while the app runs (see [site.handler]).
// The graph's elector.Observer, which fxmodule gives every LeaderJob, is
// a leaderprom.Collector, for /metrics, with the ring of transitions that
// the status page shows.
func webOptions() fx.Option {
	return fx.Options(
		fx.Provide(
			leaderprom.New,
			func() *transitions { return new(transitions) },
			func(c *leaderprom.Collector, t *transitions) elector.Observer { return observers{c, t} },
		),
		fx.Invoke(serveHTTP),
	)
}

// serveHTTP appends the hooks that listen on o.http when the app starts
// and shut the server down when it stops. Invoked before the jobs are
// built, it starts before them and stops after them; asking for the store,
// it starts after the store is opened and stops before it is closed.
func serveHTTP(lc fx.Lifecycle, o options, log *slog.Logger, store elector.Store, reg *fxmodule.Registry, c *leaderprom.Collector, t *transitions) {
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(c, collectors.NewGoCollector())
	s := &site{
		holder:  o.holder,
		where:   o.store() + " " + o.target(),
		store:   store,
		reg:     reg,
		ring:    t,
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
	Jobs() []decorator.Snapshot
	Healthy(*http.Request) error
	Ready(*http.Request) error
}

// site is the HTTP server of an instance.
type site struct {
	holder  string        // this instance's holder name
	where   string        // the kind of store and its target
	store   elector.Store // the lease store
	reg     registry
	ring    *transitions
	metrics http.Handler
}

// handler serves:
//
//   - / the status page, which shows /leases and refreshes every 2 s;
//   - /leases the leases in the store, this instance's jobs and the last
//     transitions it saw, as JSON (see [leasesPage]);
//   - /metrics the Prometheus metrics of the jobs (leaderprom) and of Go;
//   - /healthz the liveness probe (fxmodule.Registry.Healthy): 503 only
//     while a job's inner Start or Stop overran its timeout;
//   - /readyz the readiness probe (fxmodule.Registry.Ready), never gated on
//     leadership.
func (s *site) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("GET /leases", s.leases)
	mux.Handle("GET /metrics", s.metrics)
	mux.HandleFunc("GET /healthz", probe(s.reg.Healthy))
	mux.HandleFunc("GET /readyz", probe(s.reg.Ready))
	return mux
}

func (s *site) page(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("Cache-Control", "no-store")
	_, _ = w.Write(pageHTML)
}

// leasesPage is the body of /leases.
type leasesPage struct {
	Holder string    `json:"holder"` // this instance
	Store  string    `json:"store"`  // the kind of store and its target, such as "sqlite leaderaware.db"
	Now    time.Time `json:"now"`    // this instance's clock
	// Leases are every lease in the store, by name; Error says why they
	// could not be read (the response is then a 503).
	Leases []leaseJSON `json:"leases"`
	Error  string      `json:"error,omitempty"`
	// Jobs are this instance's decorated jobs, by lease name.
	Jobs []jobJSON `json:"jobs"`
	// Transitions are the last elections and demotions of this instance's
	// jobs, newest first.
	Transitions []transition `json:"transitions"`
}

// jobJSON is one of this instance's jobs, from its decorator.Snapshot.
type jobJSON struct {
	Lease   string `json:"lease"`
	Job     string `json:"job"` // its type
	Leading bool   `json:"leading"`
	// The current term, while there is one.
	Holder                string     `json:"holder,omitempty"`
	Token                 uint64     `json:"token,omitempty"`
	Since                 *time.Time `json:"since,omitempty"`
	Renewed               *time.Time `json:"renewed,omitempty"` // the writer's clock
	TrustRemainingSeconds *float64   `json:"trust_remaining_seconds,omitempty"`
	// Overran names the inner call that overran its timeout and has not
	// returned ("inner Start" or "inner Stop"): /healthz fails meanwhile.
	Overran string `json:"overran,omitempty"`
}

func (s *site) leases(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), leasesTimeout)
	defer cancel()
	rows, err := listLeases(ctx, s.store)
	now := time.Now()
	p := leasesPage{
		Holder:      s.holder,
		Store:       s.where,
		Now:         now,
		Leases:      leasesJSON(rows, now),
		Jobs:        jobsJSON(s.reg.Jobs()),
		Transitions: s.ring.last(),
	}
	code := http.StatusOK
	if err != nil {
		p.Error, code = err.Error(), http.StatusServiceUnavailable
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(p)
}

// jobsJSON returns the snapshots as JSON values, by lease name.
func jobsJSON(snaps []decorator.Snapshot) []jobJSON {
	out := make([]jobJSON, len(snaps))
	for i, s := range snaps {
		j := jobJSON{Lease: s.Lease, Job: s.Job, Leading: s.Leading, Holder: s.Holder, Token: s.Token, Overran: s.Overran}
		if !s.Since.IsZero() {
			j.Since = &s.Since
		}
		if !s.Renewed.IsZero() {
			j.Renewed = &s.Renewed
		}
		if s.TrustKnown && s.Token != 0 {
			trust := s.TrustRemaining.Seconds()
			j.TrustRemainingSeconds = &trust
		}
		out[i] = j
	}
	slices.SortFunc(out, func(a, b jobJSON) int { return cmp.Compare(a.Lease, b.Lease) })
	return out
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
