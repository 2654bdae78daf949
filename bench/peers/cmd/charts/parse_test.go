package main

import (
	"strings"
	"testing"
)

const sampleOutput = `goos: linux
goarch: amd64
pkg: github.com/leaderaware/leaderaware/bench
BenchmarkCycle/after=10-2   	  175249	      6634 ns/op	         2.000 goroutines	         0 left	    2408 B/op	      35 allocs/op
BenchmarkCycle/after=10-2   	  179844	      6377 ns/op	         2.000 goroutines	         0 left	    2408 B/op	      35 allocs/op
BenchmarkCycle/after=10-2   	  196334	      6267 ns/op	         2.000 goroutines	         0 left	    2408 B/op	      35 allocs/op
BenchmarkCycle/after=10000-2         	  193447	      6105 ns/op	         2.000 goroutines	         0 left	    2408 B/op	      35 allocs/op
BenchmarkCrashFailover/ttl=1.5s/impl=client-go-2            	       1	      1494 max-ms/failover	       426.2 max-ms/overlap	      1248 ms/failover
BenchmarkCrashFailover/ttl=1.5s/impl=client-go-2            	       1	      1600 max-ms/failover	       100.0 max-ms/overlap	      1300 ms/failover
BenchmarkFrozenLeader/ttl=2s/impl=leaderaware               	       1	      2001 min-ms/from-renewal
BenchmarkFrozenLeader/ttl=2s/impl=leaderaware               	       1	      2100 min-ms/from-renewal
BenchmarkX-2 this is a log line
--- BENCH: BenchmarkY
PASS
ok  	github.com/leaderaware/leaderaware/bench	306.194s
`

func TestParse(t *testing.T) {
	r := results{}
	if err := r.parse(strings.NewReader(sampleOutput)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, unit string
		want       float64
	}{
		{"BenchmarkCycle/after=10", "ns/op", 6377},                              // median of 3
		{"BenchmarkCycle/after=10000", "ns/op", 6105},                           // one run
		{"BenchmarkCrashFailover/ttl=1.5s/impl=client-go", "ms/failover", 1274}, // median of 2
		{"BenchmarkCrashFailover/ttl=1.5s/impl=client-go", "max-ms/failover", 1600},
		{"BenchmarkCrashFailover/ttl=1.5s/impl=client-go", "max-ms/overlap", 426.2},
		{"BenchmarkFrozenLeader/ttl=2s/impl=leaderaware", "min-ms/from-renewal", 2001},
	} {
		got, ok := r.value(c.name, c.unit)
		if !ok || got != c.want {
			t.Errorf("%s %s = %v, %v; want %v", c.name, c.unit, got, ok, c.want)
		}
	}
	if _, ok := r.value("BenchmarkCycle/after=10", "ms/failover"); ok {
		t.Error("a unit the benchmark does not report has a value")
	}
	if len(r) != 4 {
		t.Errorf("parsed %d benchmarks, want 4: %v", len(r), r)
	}
}

func TestParseBadLine(t *testing.T) {
	r := results{}
	err := r.parse(strings.NewReader("BenchmarkA-2  1  12 ns/op 7\n"))
	if err == nil {
		t.Fatal("a value without a unit was accepted")
	}
}
