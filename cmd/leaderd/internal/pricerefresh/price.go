package pricerefresh

import (
	"context"
	"time"
)

// Price is the price of one symbol as a [PriceSource] reports it.
type Price struct {
	Symbol string  // non-empty, such as "BTC"
	Value  float64 // in the source's quote currency
}

// PriceSource supplies current prices. Prices must honour ctx: the job
// bounds each refresh with [Config.Timeout].
type PriceSource interface {
	Prices(ctx context.Context) ([]Price, error)
}

// Quote is a stored price: what [Job.Latest] returns.
type Quote struct {
	Symbol    string
	Value     float64
	FetchedAt time.Time // when the source returned it, by [Config.Now]
	Token     uint64    // fencing token of the term that wrote it
}
