// Command charts turns `go test -bench` output of leaderaware's benchmarks
// into the PNG charts in bench/:
//
//   - cycle.png: the cost of one Start/Stop cycle against the number of
//     cycles already done, the old design (BenchmarkOldDesignCycle) against
//     ours (BenchmarkCycle), log–log. Input: the root module's bench output.
//   - failover.png: crash failover, frozen-leader takeover and graceful
//     handoff times, leaderaware (SQLite, PostgreSQL, memory store) against
//     client-go leaderelection, one panel per TTL with the TTL marked.
//     Input: the root module's bench output (BenchmarkFailover,
//     BenchmarkSQLiteCrashFailover) and this module's (BenchmarkCrashFailover,
//     BenchmarkFrozenLeader, BenchmarkHandoff).
//
// Usage:
//
//	go run ./cmd/charts [-cycle FILE.png] [-failover FILE.png] BENCH-OUTPUT...
//
// Every input file is read, in any order; each chart uses the benchmarks it
// finds and names on stderr the ones it did not find. A chart none of whose
// benchmarks are in the input is an error. See bench/peers/README.md for the
// commands that produce the input.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

func main() {
	cycleOut := flag.String("cycle", "", "write the cycle-cost chart to this PNG file")
	failoverOut := flag.String("failover", "", "write the failover chart to this PNG file")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: charts [-cycle FILE.png] [-failover FILE.png] BENCH-OUTPUT...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*cycleOut, *failoverOut, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "charts:", err)
		os.Exit(1)
	}
}

func run(cycleOut, failoverOut string, inputs []string) error {
	if len(inputs) == 0 || (cycleOut == "" && failoverOut == "") {
		flag.Usage()
		return errors.New("need -cycle or -failover, and at least one input file")
	}
	r := results{}
	for _, path := range inputs {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		err = r.parse(f)
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	var errs []error
	if cycleOut != "" {
		errs = append(errs, cycleChart(r, cycleOut))
	}
	if failoverOut != "" {
		errs = append(errs, failoverChart(r, failoverOut))
	}
	return errors.Join(errs...)
}

// warnMissing tells which benchmarks a chart looked for and did not find.
func warnMissing(chart string, missing []string) {
	for _, m := range missing {
		fmt.Fprintf(os.Stderr, "charts: %s: not in the input, left out: %s\n", chart, m)
	}
}
