package pricerefresh_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/pricerefresh"
)

// serve starts a test server that answers every request with status and body.
func serve(t *testing.T, status int, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func source(t *testing.T, url string) *pricerefresh.HTTPSource {
	t.Helper()
	src, err := pricerefresh.NewHTTPSource(url, time.Second)
	require.NoError(t, err)
	return src
}

func TestHTTPSourceObject(t *testing.T) {
	srv := serve(t, http.StatusOK, `{"BTC": 64000.5, "ETH": 3100}`)
	prices, err := source(t, srv.URL).Prices(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []pricerefresh.Price{{"BTC", 64000.5}, {"ETH", 3100}}, prices)
}

func TestHTTPSourceArray(t *testing.T) {
	srv := serve(t, http.StatusOK, `[{"symbol": "BTC", "price": 64000.5}, {"symbol": "SOL", "price": 0.25}]`)
	prices, err := source(t, srv.URL).Prices(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []pricerefresh.Price{{"BTC", 64000.5}, {"SOL", 0.25}}, prices)
}

func TestHTTPSourceServerError(t *testing.T) {
	srv := serve(t, http.StatusInternalServerError, `{"error": "upstream down"}`)
	_, err := source(t, srv.URL).Prices(t.Context())
	require.Error(t, err)
	assert.ErrorContains(t, err, "GET "+srv.URL)
	assert.ErrorContains(t, err, "HTTP status 500 Internal Server Error")
	assert.ErrorContains(t, err, "upstream down")
}

func TestHTTPSourceBadJSON(t *testing.T) {
	tests := map[string]struct{ body, want string }{
		"truncated":       {`{"BTC": 640`, "bad JSON"},
		"string price":    {`{"BTC": "640"}`, `price of "BTC"`},
		"null price":      {`{"BTC": null}`, `price of "BTC" is null`},
		"empty object":    {`{}`, "no prices"},
		"empty body":      {``, "empty body"},
		"scalar":          {`42`, "want an object or an array"},
		"empty symbol":    {`{"": 1}`, "empty symbol"},
		"duplicate":       {`[{"symbol":"A","price":1},{"symbol":"A","price":2}]`, `symbol "A" appears twice`},
		"missing price":   {`[{"symbol":"A"}]`, `item 0 ("A") has no price`},
		"trailing object": {`{"A": 1} {"B": 2}`, "data after the top-level object"},
		"html":            {`<html>oops</html>`, "want an object or an array"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			srv := serve(t, http.StatusOK, tt.body)
			_, err := source(t, srv.URL).Prices(t.Context())
			require.Error(t, err)
			assert.ErrorContains(t, err, "GET "+srv.URL+": bad JSON: ")
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func TestHTTPSourceBodyTooLong(t *testing.T) {
	srv := serve(t, http.StatusOK, `{"BTC": 1, "PAD": "`+strings.Repeat("x", 100)+`"}`)
	src := source(t, srv.URL)
	src.MaxBodyBytes = 50
	_, err := src.Prices(t.Context())
	assert.ErrorContains(t, err, "body longer than 50 bytes")
}

func TestHTTPSourceTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // hang until the client gives up
	}))
	t.Cleanup(srv.Close)
	src, err := pricerefresh.NewHTTPSource(srv.URL, 100*time.Millisecond)
	require.NoError(t, err)
	t0 := time.Now()
	_, err = src.Prices(t.Context())
	require.Error(t, err)
	assert.Less(t, time.Since(t0), 5*time.Second, "the client timeout did not apply")
	assert.ErrorContains(t, err, srv.URL)
	assert.ErrorContains(t, err, "Client.Timeout exceeded")
}

func TestHTTPSourceContextCancelled(t *testing.T) {
	srv := serve(t, http.StatusOK, `{"BTC": 1}`)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := source(t, srv.URL).Prices(ctx)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestNewHTTPSourceBadInput(t *testing.T) {
	_, err := pricerefresh.NewHTTPSource("prices.example.com/v1", time.Second)
	assert.EqualError(t, err, `pricerefresh: price URL "prices.example.com/v1" is not an absolute http or https URL`)
	_, err = pricerefresh.NewHTTPSource("ftp://prices.example.com", time.Second)
	assert.ErrorContains(t, err, `"ftp://prices.example.com"`)
	_, err = pricerefresh.NewHTTPSource("http://prices.example.com", -time.Second)
	assert.EqualError(t, err, "pricerefresh: HTTP timeout -1s is negative")
	_, err = (&pricerefresh.HTTPSource{}).Prices(t.Context())
	assert.ErrorContains(t, err, `price URL ""`)
}
