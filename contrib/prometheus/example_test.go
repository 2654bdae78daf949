package leaderprom_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	leaderprom "github.com/leaderaware/leaderaware/contrib/prometheus"
	"github.com/leaderaware/leaderaware/elector"
)

// An elector reports to a Collector registered on the registry that
// /metrics serves. (A decorated job given the same Collector would also set
// leaderaware_leader to 1 while it leads.)
func Example() {
	metrics := leaderprom.New()
	registry := prometheus.NewRegistry()
	registry.MustRegister(metrics)
	e, _ := elector.New(elector.NewMemoryStore(), "price-refresh", elector.Config{Observer: metrics})
	term, _ := e.Campaign(context.Background())
	defer term.Resign(context.Background())

	// A scrape of /metrics.
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(registry, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for s := bufio.NewScanner(rec.Body); s.Scan(); {
		if strings.HasPrefix(s.Text(), "leaderaware_elections_total") || strings.HasPrefix(s.Text(), "leaderaware_term_token") {
			fmt.Println(s.Text())
		}
	}
	// Output:
	// leaderaware_elections_total{lease="price-refresh"} 1
	// leaderaware_term_token{lease="price-refresh"} 1
}
