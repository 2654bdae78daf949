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
	b := bounds{ttl: 1500 * time.Millisecond, retry: 500 * time.Millisecond, writeEvery: 50 * time.Millisecond, margin: time.Second,
		perTerm: 2500 * time.Millisecond, perDeletion: 4 * time.Second, resumeStop: time.Second}
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	starts := []started{{holder: "a", token: 1}, {holder: "b", token: 2}, {holder: "c", token: 3}}
	rows := func(spec ...any) []row { // token, holder, ms, token, holder, ms, ...
		var rs []row
		for i := 0; i < len(spec); i += 3 {
			rs = append(rs, row{seq: int64(len(rs) + 1), token: uint64(spec[i].(int)), holder: spec[i+1].(string),
				n: int64(len(rs) + 1), at: at(spec[i+2].(int))})
		}
		return rs
	}
	inFile := func(file int, rs []row) []row {
		for i := range rs {
			rs[i].file = file
		}
		return rs
	}
	run := func(holder string, token uint64, start, stopCalled, end int) jobRun {
		r := jobRun{holder: holder, token: token, start: at(start), end: at(end), how: "halt"}
		if stopCalled >= 0 {
			r.stopCalled = at(stopCalled)
		} else {
			r.how, r.dead = "killed", at(end+5) // seen dead 5 ms after the kill
		}
		return r
	}
	for _, tc := range []struct {
		name string
		in   runLog
		want string // "" for no violation
	}{
		{name: "ok", in: runLog{rows: rows(1, "a", 0, 1, "a", 50, 2, "b", 2000, 3, "c", 4000), starts: starts,
			runs: []jobRun{run("a", 1, 0, 100, 110), run("b", 2, 1990, 3900, 3910), run("c", 3, 3995, -1, 5000)}}},
		{name: "stale write after newer token", in: runLog{rows: rows(1, "a", 0, 2, "b", 2000, 1, "a", 2050), starts: starts}, want: "stale write"},
		{name: "term not contiguous", in: runLog{rows: rows(1, "a", 0, 2, "b", 100, 2, "b", 150, 3, "c", 200, 2, "b", 250), starts: starts}, want: "not contiguous"},
		{name: "tokens go back", in: runLog{rows: rows(2, "b", 0, 1, "a", 100), starts: starts}, want: "tokens must increase"},
		{name: "gap too long", in: runLog{rows: rows(1, "a", 0, 2, "b", 3100), starts: starts}, want: "leaderless for 3.1s"},
		{name: "gap excused by a long pause", in: runLog{rows: rows(1, "a", 0, 2, "b", 4000), starts: starts,
			pauses: []pause{{holder: "a", start: at(20), end: at(3020)}}}},
		{name: "pause of another holder excuses nothing", in: runLog{rows: rows(1, "a", 0, 2, "b", 4000), starts: starts,
			pauses: []pause{{holder: "b", start: at(20), end: at(3020)}}}, want: "leaderless for 4s"},
		{name: "short pause excuses nothing", in: runLog{rows: rows(1, "a", 0, 2, "b", 3200), starts: starts,
			pauses: []pause{{holder: "a", start: at(20), end: at(1020)}}}, want: "leaderless"},
		{name: "gap excused by a term without rows", in: runLog{rows: rows(1, "a", 0, 3, "c", 5000),
			starts: []started{{holder: "a", token: 1}, {holder: "b", token: 2, at: at(1500)}, {holder: "c", token: 3, at: at(4900)}}}},
		{name: "a term without rows excuses only its own time", in: runLog{rows: rows(1, "a", 0, 3, "c", 6000),
			starts: []started{{holder: "a", token: 1}, {holder: "b", token: 2, at: at(1500)}, {holder: "c", token: 3, at: at(5900)}}},
			want: "leaderless for 6s"},
		{name: "gap excused by a deletion", in: runLog{rows: append(inFile(0, rows(1, "a", 0)), inFile(1, rows(2, "b", 6000))...),
			starts: starts[:2], deletions: []time.Time{at(100)}}},
		{name: "row of a token never started", in: runLog{rows: rows(1, "a", 0, 4, "d", 100), starts: starts}, want: "never started"},
		{name: "row by another holder than the starter", in: runLog{rows: rows(1, "a", 0, 2, "c", 100), starts: starts}, want: "but b started it"},
		{name: "token started twice", in: runLog{rows: rows(1, "a", 0), starts: append(starts, started{holder: "d", token: 1})}, want: "started twice"},
		{name: "token reused by a new file", in: runLog{
			starts: []started{{holder: "a", token: 5}, {holder: "b", token: 5, file: 1}}}, want: "started twice"},
		{name: "token lowered by a new file", in: runLog{
			starts: []started{{holder: "a", token: 7}, {holder: "b", token: 5, file: 1}}}, want: "lowered or reused across the deletion"},
		{name: "rows lowered by a new file", in: runLog{rows: append(inFile(0, rows(7, "a", 0)), inFile(1, rows(5, "b", 2000))...),
			starts: []started{{holder: "a", token: 7}, {holder: "b", token: 5, file: 1}}}, want: "token 5 committed after token 7 (seq 1 of file 0): tokens were lowered"},
		{name: "lost write", in: runLog{rows: rows(1, "a", 0), starts: starts, wrote: []wrote{{holder: "a", token: 1, n: 1}, {holder: "a", token: 1, n: 2}}},
			want: "write 2 of a (token 1) was reported committed but is in no file"},
		{name: "two terms at once", in: runLog{starts: starts,
			runs: []jobRun{run("a", 1, 0, 2000, 2010), run("b", 2, 1500, 3000, 3010)}},
			want: "500ms before the job of token 1 (a) was told to stop (at 12:00:02.000; it stopped at 12:00:02.010): the old process could still write"},
		{name: "a killed run overlaps", in: runLog{starts: starts,
			runs: []jobRun{run("a", 1, 0, -1, 2010), run("b", 2, 1500, 3000, 3010)}},
			want: "two terms at once: the job of token 2 (b) started at 12:00:01.500, 510ms before SIGKILL was sent to the process of token 1 (a) at 12:00:02.010 " +
				"(seen dead at 12:00:02.015): the old process could still write"},
		{name: "a takeover after the kill, before the death was seen", in: runLog{starts: starts,
			runs: []jobRun{run("a", 1, 0, -1, 1498), run("b", 2, 1500, 3000, 3010)}}},
		{name: "a run exited without stopping", in: runLog{starts: starts,
			runs: []jobRun{{holder: "a", token: 1, start: at(0), end: at(2010), dead: at(2010), how: "exited"}, run("b", 2, 1500, 3000, 3010)}},
			want: "before the process of token 1 (a) exited (seen at 12:00:02.010) without stopping its job: the old process could still write"},
		{name: "a slow inner Stop overlaps", in: runLog{starts: starts,
			runs: []jobRun{run("a", 1, 0, 1400, 1600), run("b", 2, 1500, 3000, 3010)}}, want: "overran the TTL/10 margin"},
		{name: "a run still running overlaps", in: runLog{starts: starts,
			runs: []jobRun{{holder: "a", token: 1, start: at(0), how: "running"}, run("b", 2, 1500, 3000, 3010)}}, want: "still running at the end"},
		{name: "overlap excused by a rollback within TTL before the takeover", in: runLog{starts: starts, rollbacks: []time.Time{at(600)},
			runs: []jobRun{run("a", 1, 0, 2000, 2010), run("b", 2, 1700, 5000, 5010)}}},
		{name: "a rollback more than TTL before the takeover excuses nothing", in: runLog{starts: starts, rollbacks: []time.Time{at(100)},
			runs: []jobRun{run("a", 1, 0, 2000, 2010), run("b", 2, 1700, 5000, 5010)}}, want: "two terms at once"},
		{name: "overlap excused by a pause", in: runLog{starts: starts, pauses: []pause{{holder: "a", start: at(100), end: at(2500)}},
			runs: []jobRun{run("a", 1, 0, 2600, 2610), run("b", 2, 1700, 3000, 3010)}}},
		{name: "overlap long after the pause", in: runLog{starts: starts, pauses: []pause{{holder: "a", start: at(100), end: at(2500)}},
			runs: []jobRun{run("a", 1, 0, 3600, 3610), run("b", 2, 1700, 5000, 5010)}}, want: "two terms at once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := check(tc.in, b)
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
