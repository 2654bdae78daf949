//go:build linux

package chaos

import (
	"strings"
	"testing"
	"time"
)

// TestCheck feeds the checker made-up runs, so that a chaos run passing
// means something: each broken invariant must be reported.
func TestCheck(t *testing.T) {
	b := bounds{ttl: 1500 * time.Millisecond, retry: 500 * time.Millisecond, writeEvery: 50 * time.Millisecond, margin: time.Second}
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	starts := []started{{"a", 1}, {"b", 2}, {"c", 3}}
	rows := func(spec ...any) []row { // token, holder, ms, token, holder, ms, ...
		var rs []row
		for i := 0; i < len(spec); i += 3 {
			rs = append(rs, row{seq: int64(len(rs) + 1), token: uint64(spec[i].(int)), holder: spec[i+1].(string), at: at(spec[i+2].(int))})
		}
		return rs
	}
	for _, tc := range []struct {
		name   string
		rows   []row
		starts []started
		pauses []pause
		want   string // "" for no violation
	}{
		{name: "ok", rows: rows(1, "a", 0, 1, "a", 50, 2, "b", 2000, 3, "c", 4000), starts: starts},
		{name: "stale write after newer token", rows: rows(1, "a", 0, 2, "b", 2000, 1, "a", 2050), starts: starts, want: "stale write"},
		{name: "term not contiguous", rows: rows(1, "a", 0, 2, "b", 100, 2, "b", 150, 3, "c", 200, 2, "b", 250), starts: starts, want: "not contiguous"},
		{name: "tokens go back", rows: rows(2, "b", 0, 1, "a", 100), starts: starts, want: "tokens must increase"},
		{name: "gap too long", rows: rows(1, "a", 0, 2, "b", 3100), starts: starts, want: "leaderless for 3.1s"},
		{name: "gap excused by a long pause", rows: rows(1, "a", 0, 2, "b", 4000), starts: starts,
			pauses: []pause{{holder: "a", start: at(20), end: at(3020)}}},
		{name: "pause of another holder excuses nothing", rows: rows(1, "a", 0, 2, "b", 4000), starts: starts,
			pauses: []pause{{holder: "b", start: at(20), end: at(3020)}}, want: "leaderless for 4s"},
		{name: "short pause excuses nothing", rows: rows(1, "a", 0, 2, "b", 3200), starts: starts,
			pauses: []pause{{holder: "a", start: at(20), end: at(1020)}}, want: "leaderless"},
		{name: "row of a token never started", rows: rows(1, "a", 0, 4, "d", 100), starts: starts, want: "never started"},
		{name: "row by another holder than the starter", rows: rows(1, "a", 0, 2, "c", 100), starts: starts, want: "but b started it"},
		{name: "token started twice", rows: rows(1, "a", 0), starts: append(starts, started{"d", 1}), want: "started twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := check(tc.rows, tc.starts, tc.pauses, b)
			got := strings.Join(rep.violations, "\n")
			switch {
			case tc.want == "" && got != "":
				t.Errorf("violations:\n%s", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("violations %q, want one containing %q", got, tc.want)
			}
		})
	}
}
