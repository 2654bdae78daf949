package leaderprom

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Upper bounds of the histogram buckets. Store calls: 100µs to 10s (a call
// is bounded by the trust window). Job transitions: 1ms to 60s (a Start or
// Stop is bounded by its timeout, 15s by default, and may overrun it).
var (
	storeBuckets = [nBuckets]time.Duration{
		100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
		time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
		10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
		100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
	}
	jobBuckets = [nBuckets]time.Duration{
		time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
		10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
		100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2500 * time.Millisecond, 5 * time.Second,
		10 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute,
	}
)

const nBuckets = 16

// histogram counts durations into fixed buckets without allocating. Its
// zero value is empty. The sum is kept in nanoseconds, so it is exact.
type histogram struct {
	counts [nBuckets]uint64 // counts[i]: observations in (bounds[i-1], bounds[i]]
	count  uint64
	sum    time.Duration
}

func (h *histogram) observe(bounds *[nBuckets]time.Duration, d time.Duration) {
	for i, b := range bounds {
		if d <= b {
			h.counts[i]++
			break
		}
	}
	h.count++
	h.sum += d
}

// metric returns h as a Prometheus histogram, with cumulative buckets.
func (h *histogram) metric(desc *prometheus.Desc, bounds *[nBuckets]time.Duration, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, nBuckets)
	var n uint64
	for i, b := range bounds {
		n += h.counts[i]
		buckets[b.Seconds()] = n
	}
	return prometheus.MustNewConstHistogram(desc, h.count, h.sum.Seconds(), buckets, labels...)
}
