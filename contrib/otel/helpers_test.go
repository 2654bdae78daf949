package leaderotel_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	leaderotel "github.com/leaderaware/leaderaware/contrib/otel"
)

const holder = "host-42-5f3a9c" // never an attribute value

var (
	storeBounds = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	jobBounds   = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60}
)

// replica is one process: a meter provider with a manual reader, and an
// Observer on it.
type replica struct {
	*leaderotel.Observer
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func newReplica(t *testing.T) replica {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { require.NoError(t, mp.Shutdown(t.Context())) })
	o, err := leaderotel.New(mp)
	require.NoError(t, err)
	return replica{o, reader, mp}
}

// collect returns what a Collect of r's reader returns, by instrument name.
func (r replica) collect(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.reader.Collect(t.Context(), &rm))
	got := make(map[string]metricdata.Metrics)
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, leaderotel.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			got[m.Name] = m
		}
	}
	return got
}

// expect checks the named instruments of a Collect, ignoring timestamps.
func expect(t *testing.T, got map[string]metricdata.Metrics, want ...metricdata.Metrics) {
	t.Helper()
	for _, w := range want {
		g, ok := got[w.Name]
		if !ok {
			t.Errorf("no %s in the Collect", w.Name)
			continue
		}
		metricdatatest.AssertEqual(t, w, g, metricdatatest.IgnoreTimestamp())
	}
}

func lease(name string, kv ...attribute.KeyValue) attribute.Set {
	return attribute.NewSet(append(kv, attribute.String("leaderaware.lease", name))...)
}

func point[N int64 | float64](v N, set attribute.Set) metricdata.DataPoint[N] {
	return metricdata.DataPoint[N]{Attributes: set, Value: v}
}

// histPoint is the data point of a histogram with bounds that recorded the
// durations ds.
func histPoint(bounds []float64, set attribute.Set, ds ...time.Duration) metricdata.HistogramDataPoint[float64] {
	p := metricdata.HistogramDataPoint[float64]{Attributes: set, Bounds: bounds, BucketCounts: make([]uint64, len(bounds)+1)}
	var lo, hi float64
	for i, d := range ds {
		s := d.Seconds()
		b := len(bounds)
		for j, upper := range bounds {
			if s <= upper {
				b = j
				break
			}
		}
		p.BucketCounts[b]++
		p.Count++
		p.Sum += s
		if i == 0 {
			lo, hi = s, s
		}
		lo, hi = min(lo, s), max(hi, s)
	}
	if len(ds) > 0 {
		p.Min, p.Max = metricdata.NewExtrema(lo), metricdata.NewExtrema(hi)
	}
	return p
}
