package pricerefresh

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"time"
)

// Defaults of [HTTPSource].
const (
	DefaultHTTPTimeout  = 10 * time.Second // the timeout of the client NewHTTPSource builds
	DefaultMaxBodyBytes = 1 << 20          // 1 MiB
)

// HTTPSource fetches prices with a GET request. The response must be a 2xx
// with a JSON body that is either an object mapping symbols to prices,
//
//	{"BTC": 64000.5, "ETH": 3100}
//
// or an array of objects with "symbol" and "price",
//
//	[{"symbol": "BTC", "price": 64000.5}]
//
// Errors name the URL and, as the case may be, the HTTP status, the JSON
// problem or the timeout.
type HTTPSource struct {
	// URL is the absolute http or https URL to GET.
	URL string
	// Client sends the request. It must have a Timeout (or a transport
	// that bounds requests); nil means a client with DefaultHTTPTimeout.
	Client *http.Client
	// MaxBodyBytes bounds the response body; a longer body is an error.
	// Zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// NewHTTPSource returns a source for rawURL whose client times out after
// timeout (zero means DefaultHTTPTimeout). It checks that rawURL is an
// absolute http or https URL and that timeout is not negative.
func NewHTTPSource(rawURL string, timeout time.Duration) (*HTTPSource, error) {
	if err := checkURL(rawURL); err != nil {
		return nil, err
	}
	if timeout < 0 {
		return nil, fmt.Errorf("pricerefresh: HTTP timeout %v is negative", timeout)
	}
	if timeout == 0 {
		timeout = DefaultHTTPTimeout
	}
	return &HTTPSource{URL: rawURL, Client: &http.Client{Timeout: timeout}}, nil
}

func checkURL(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("pricerefresh: price URL %q: %w", rawURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("pricerefresh: price URL %q is not an absolute http or https URL", rawURL)
	}
	return nil
}

// Prices implements [PriceSource].
func (s *HTTPSource) Prices(ctx context.Context) ([]Price, error) {
	if err := checkURL(s.URL); err != nil {
		return nil, err
	}
	client := s.Client
	if client == nil {
		client = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	limit := s.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("pricerefresh: GET %s: %w", s.URL, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		// err is a *url.Error that names the method and URL.
		return nil, fmt.Errorf("pricerefresh: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("pricerefresh: GET %s: reading body: %w", s.URL, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("pricerefresh: GET %s: HTTP status %s: %q", s.URL, resp.Status, snippet(body))
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("pricerefresh: GET %s: body longer than %d bytes", s.URL, limit)
	}
	prices, err := parsePrices(body)
	if err != nil {
		return nil, fmt.Errorf("pricerefresh: GET %s: bad JSON: %w", s.URL, err)
	}
	return prices, nil
}

// snippet returns the start of body, for error messages.
func snippet(body []byte) string {
	const n = 200
	if len(body) > n {
		return string(body[:n]) + "..."
	}
	return string(body)
}

// parsePrices parses a symbol→price object or an array of
// {"symbol", "price"} objects. Every symbol must be non-empty and appear
// once, every price must be a number.
func parsePrices(body []byte) ([]Price, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, errors.New("empty body")
	}
	var prices []Price
	switch trimmed[0] {
	case '{':
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		if _, err := dec.Token(); err != nil { // {
			return nil, err
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil, err
			}
			sym, _ := tok.(string)
			var v *float64
			if err := dec.Decode(&v); err != nil {
				return nil, fmt.Errorf("price of %q: %w", sym, err)
			}
			if v == nil {
				return nil, fmt.Errorf("price of %q is null", sym)
			}
			prices = append(prices, Price{Symbol: sym, Value: *v})
		}
		if _, err := dec.Token(); err != nil { // }
			return nil, err
		}
		if _, err := dec.Token(); err != io.EOF {
			return nil, errors.New("data after the top-level object")
		}
	case '[':
		var items []struct {
			Symbol string   `json:"symbol"`
			Price  *float64 `json:"price"`
		}
		if err := json.Unmarshal(trimmed, &items); err != nil {
			return nil, err
		}
		for i, it := range items {
			if it.Price == nil {
				return nil, fmt.Errorf("item %d (%q) has no price", i, it.Symbol)
			}
			prices = append(prices, Price{Symbol: it.Symbol, Value: *it.Price})
		}
	default:
		return nil, fmt.Errorf("want an object or an array, got %q", snippet(trimmed))
	}
	if len(prices) == 0 {
		return nil, errors.New("no prices")
	}
	return prices, checkPrices(prices)
}

// checkPrices refuses empty or repeated symbols and non-finite values.
func checkPrices(prices []Price) error {
	seen := make(map[string]bool, len(prices))
	for _, p := range prices {
		if p.Symbol == "" {
			return errors.New("empty symbol")
		}
		if seen[p.Symbol] {
			return fmt.Errorf("symbol %q appears twice", p.Symbol)
		}
		seen[p.Symbol] = true
		if math.IsNaN(p.Value) || math.IsInf(p.Value, 0) {
			return fmt.Errorf("price of %q is %v", p.Symbol, p.Value)
		}
	}
	return nil
}
