package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// results holds every metric of every benchmark in some `go test -bench`
// output: by benchmark name (without the -GOMAXPROCS suffix), by unit, the
// values of each line (several with -count).
type results map[string]map[string][]float64

var procSuffix = regexp.MustCompile(`-\d+$`)

// parse reads `go test -bench` output and adds its benchmark lines to r.
// Other lines (goos, PASS, ok, logs) are skipped.
func (r results) parse(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // a log line that starts with a benchmark's name
		}
		if len(f)%2 != 0 {
			return fmt.Errorf("line %d: a value without a unit: %q", n, sc.Text())
		}
		name := procSuffix.ReplaceAllString(f[0], "")
		if r[name] == nil {
			r[name] = make(map[string][]float64)
		}
		for i := 2; i < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return fmt.Errorf("line %d: %q is not a number: %w", n, f[i], err)
			}
			r[name][f[i+1]] = append(r[name][f[i+1]], v)
		}
	}
	return sc.Err()
}

// value returns one figure for a metric over the runs in r: the largest
// for a max-… unit, the smallest for a min-… unit, and otherwise the median
// of the runs' values.
func (r results) value(name, unit string) (float64, bool) {
	vs := r[name][unit]
	if len(vs) == 0 {
		return 0, false
	}
	switch {
	case strings.HasPrefix(unit, "max-"):
		return slices.Max(vs), true
	case strings.HasPrefix(unit, "min-"):
		return slices.Min(vs), true
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2], true
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2, true
}
