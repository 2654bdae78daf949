package leaderotel_test

import (
	"context"
	"fmt"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	leaderotel "github.com/leaderaware/leaderaware/contrib/otel"
	"github.com/leaderaware/leaderaware/elector"
)

// An elector reports to an Observer on a meter provider; here a manual
// reader stands for the exporter. (A decorated job given the same Observer
// would also add 1 to leaderaware.leader while it leads.)
func Example() {
	reader := sdkmetric.NewManualReader()
	meterProvider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer meterProvider.Shutdown(context.Background())

	observer, err := leaderotel.New(meterProvider)
	if err != nil {
		panic(err)
	}
	e, _ := elector.New(elector.NewMemoryStore(), "price-refresh", elector.Config{Observer: observer})
	term, _ := e.Campaign(context.Background())
	defer term.Resign(context.Background())

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			if m.Name == "leaderaware.elections" {
				fmt.Println(m.Name, d.DataPoints[0].Value)
			}
		case metricdata.Gauge[int64]:
			fmt.Println(m.Name, d.DataPoints[0].Value) // leaderaware.term.token
		}
	}
	// Unordered output:
	// leaderaware.elections 1
	// leaderaware.term.token 1
}
