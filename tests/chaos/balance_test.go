//go:build linux

package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Balanced runs (-chaos.leases, by default 12 on PostgreSQL and 1, no
// group, on SQLite, whose run spends its time on the file's deletion and
// restores): every process (helperproc's mode chaos) campaigns for the
// chaos lease and the others in one placement.Group (see helperproc's
// balance), which moves leases between the processes while the schedule
// crashes, pauses and stops them.
// The chaos lease keeps every check; the others, which write no rows, keep
// those of their terms and job runs: no token started twice or lowered
// across the files, no two job runs at once.

// otherLease is what the lines of one of the other leases told.
type otherLease struct {
	starts []started
	inodes []uint64 // of each start's process
	runs   []*jobRun
}

// recordOther handles an XRUN, XHALT or YIELD line of p. The caller holds
// c.mu.
func (c *cluster) recordOther(p *proc, f []string, line string, num func(int) uint64, nanos func(int) time.Time) {
	if f[0] == "YIELD" {
		c.yields++
		return
	}
	if len(f) < 5 || f[0] == "XRUN" && len(f) < 6 {
		c.errLines = append(c.errLines, fmt.Sprintf("%s: short line %q", p.holder, line))
		return
	}
	lease, token := f[3], num(2)
	o := c.others[lease]
	if o == nil {
		o = &otherLease{}
		c.others[lease] = o
	}
	switch f[0] {
	case "XRUN":
		r := &jobRun{holder: p.holder, token: token, start: nanos(4), how: "running"}
		o.runs = append(o.runs, r)
		o.starts = append(o.starts, started{holder: p.holder, token: token, at: r.start, step: p.stepped})
		o.inodes = append(o.inodes, num(5)) // the file of the term, which the process's store may have followed to since its OPEN
		p.xrunning[lease] = r
	case "XHALT":
		if r := p.xrunning[lease]; r != nil && r.token == token && len(f) >= 6 {
			r.stopCalled, r.end, r.how = nanos(4), nanos(5), "halt"
			delete(p.xrunning, lease)
		} else {
			c.errLines = append(c.errLines, fmt.Sprintf("%s: XHALT without its XRUN: %q", p.holder, line))
		}
	}
}

// otherLogs returns, by lease, what the run left for the checker of the
// other leases: their starts and job runs, and the run's pauses and
// deletions of the file. Call it after stopAll.
func (c *cluster) otherLogs() map[string]runLog {
	c.mu.Lock()
	defer c.mu.Unlock()
	logs := make(map[string]runLog, len(c.others))
	for lease, o := range c.others {
		in := runLog{pauses: c.pauses, deletions: c.deletions}
		for i, s := range o.starts {
			s.file = c.fileOf(o.inodes[i])
			in.starts = append(in.starts, s)
		}
		for _, r := range o.runs {
			in.runs = append(in.runs, *r)
		}
		logs[lease] = in
	}
	return logs
}

// checkOthers checks the other leases' logs (see check) and returns the
// violations, each after its lease, and the overlaps that pauses excuse.
func checkOthers(logs map[string]runLog, b bounds) (violations []string, excused int) {
	for _, lease := range slices.Sorted(maps.Keys(logs)) {
		rep := check(logs[lease], b)
		for _, v := range rep.violations {
			violations = append(violations, "lease "+lease+": "+v)
		}
		for _, o := range rep.overlaps {
			if o.excuse != "" {
				excused++
			}
		}
	}
	return violations, excused
}

// moves counts the terms that followed another term of the same lease, all
// leases together: the chaos lease's starts and the others'.
func moves(chaosStarts int, logs map[string]runLog) int {
	n := max(chaosStarts-1, 0)
	for _, in := range logs {
		n += max(len(in.starts)-1, 0)
	}
	return n
}

func perMinute(n int, d time.Duration) float64 { return float64(n) / d.Minutes() }

// TestCheckOthers feeds the other leases' lines of two processes to the
// cluster and their logs to the checker: runs of one lease that overlap,
// and a token started twice, are violations; runs of two leases at once,
// or of one lease in turn, are not.
func TestCheckOthers(t *testing.T) {
	b := bounds{ttl: 1500 * time.Millisecond, retry: 500 * time.Millisecond, resumeStop: time.Second}
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms int) string {
		return strconv.FormatInt(t0.Add(time.Duration(ms)*time.Millisecond).UnixNano(), 10)
	}
	for _, tc := range []struct {
		name  string
		lines []string // "holder line": a, b
		want  []string // the violations, in part; none if empty
		yield int
	}{
		{name: "in turn", lines: []string{
			"a XRUN a 1 l-1 " + at(0) + " 1", "b XRUN b 2 l-2 " + at(10) + " 1",
			"a XHALT a 1 l-1 " + at(100) + " " + at(101), "a YIELD a 1 l-1",
			"b XRUN b 3 l-1 " + at(200) + " 1", "b XHALT b 3 l-1 " + at(300) + " " + at(301)}, yield: 1},
		{name: "overlap", lines: []string{
			"a XRUN a 1 l-1 " + at(0) + " 1", "b XRUN b 2 l-1 " + at(50) + " 1", "a XHALT a 1 l-1 " + at(100) + " " + at(101)},
			want: []string{"lease l-1: two terms at once"}},
		{name: "token started twice", lines: []string{
			"a XRUN a 1 l-1 " + at(0) + " 1", "a XHALT a 1 l-1 " + at(100) + " " + at(101), "b XRUN b 1 l-1 " + at(200) + " 1"},
			want: []string{"lease l-1: token 1 started twice"}},
		// b's store followed the path to the new file (inode 2) before
		// its OPEN line named it: each start names its own file.
		{name: "a start on the new file before its OPEN", lines: []string{
			"a OPEN a 2", "a XRUN a 7 l-1 " + at(0) + " 2", "a XHALT a 7 l-1 " + at(100) + " " + at(101),
			"b XRUN b 8 l-1 " + at(200) + " 2"}},
		{name: "token lowered on the new file", lines: []string{
			"a XRUN a 5 l-1 " + at(0) + " 1", "a XHALT a 5 l-1 " + at(100) + " " + at(101),
			"b XRUN b 4 l-1 " + at(200) + " 2"},
			want: []string{"lease l-1: file 1 issued token 4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cluster{t: t, others: make(map[string]*otherLease), inodes: []uint64{1, 2}}
			procs := map[string]*proc{}
			for _, h := range []string{"a", "b"} {
				procs[h] = &proc{holder: h, inode: 1, xrunning: make(map[string]*jobRun)}
			}
			for _, l := range tc.lines {
				h, text, _ := strings.Cut(l, " ")
				c.record(procs[h], text)
			}
			if len(c.errLines) > 0 {
				t.Fatalf("error lines: %q", c.errLines)
			}
			v, _ := checkOthers(c.otherLogs(), b)
			if len(v) != len(tc.want) {
				t.Fatalf("violations %q, want %d", v, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(v[i], w) {
					t.Errorf("violation %q, want it to say %q", v[i], w)
				}
			}
			if c.yields != tc.yield {
				t.Errorf("%d yields, want %d", c.yields, tc.yield)
			}
		})
	}
}
