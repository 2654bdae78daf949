package pricerefresh

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
)

// defaultSimulatedPrices are the starting prices of a [SimulatedSource]
// given none.
var defaultSimulatedPrices = map[string]float64{"BTC": 60000, "ETH": 3000, "SOL": 150}

// SimulatedSource is a deterministic [PriceSource] without network: each
// call to Prices moves every symbol one step of a geometric random walk
// (about 1% per step) and returns the prices rounded to cents, in symbol
// order. Two sources with the same seed and start prices return the same
// sequence. It is safe for concurrent use.
type SimulatedSource struct {
	mu      sync.Mutex
	rng     *rand.Rand
	symbols []string // sorted
	prices  map[string]float64
}

// NewSimulatedSource returns a source seeded with seed that starts at
// start (nil or empty means BTC 60000, ETH 3000 and SOL 150). Start prices
// must be positive; others are replaced by 1.
func NewSimulatedSource(seed uint64, start map[string]float64) *SimulatedSource {
	if len(start) == 0 {
		start = defaultSimulatedPrices
	}
	s := &SimulatedSource{
		rng:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		prices: make(map[string]float64, len(start)),
	}
	for sym, p := range start {
		if !(p > 0) || math.IsInf(p, 0) {
			p = 1
		}
		s.symbols = append(s.symbols, sym)
		s.prices[sym] = p
	}
	slices.Sort(s.symbols)
	return s
}

// Prices implements [PriceSource]. It fails only if ctx has ended.
func (s *SimulatedSource) Prices(ctx context.Context) ([]Price, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Price, 0, len(s.symbols))
	for _, sym := range s.symbols {
		p := s.prices[sym] * math.Exp(0.01*s.rng.NormFloat64())
		s.prices[sym] = p
		out = append(out, Price{Symbol: sym, Value: math.Round(p*100) / 100})
	}
	return out, nil
}
