//go:build linux

package chaos

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// row is one row a leader wrote through a fenced write.
type row struct {
	file   int       // which lease file held it: 0, then 1 after the first deletion...; always 0 on PostgreSQL
	seq    int64     // assigned at insert, per file; follows commit order (see below)
	token  uint64    // the writer's fencing token
	holder string    // the writer's holder name
	n      int64     // the writer's number for the write (its WROTE line)
	at     time.Time // SQLite: the writer's host clock inside the transaction; PostgreSQL: clock_timestamp() at the insert
}

// Commit order. On SQLite every fenced write holds the file's write lock from
// BEGIN IMMEDIATE to COMMIT, so AUTOINCREMENT order is commit order. On
// PostgreSQL an identity value is taken at insert, not at commit; the chaos
// helper therefore takes a self-conflicting table lock (SHARE ROW EXCLUSIVE) before
// it inserts, so the writers' transactions are serialized and identity order
// is commit order there too. Across a deletion of the SQLite file, the rows
// of the old file (copied by the test under the file's write lock, right
// before it deleted the file) come first: no write could commit to the old
// file after the copy (see deleteSQLite).

// started is one START line: holder began the term token.
type started struct {
	holder string
	token  uint64
	file   int           // the file its process opened (see row.file)
	at     time.Time     // when the test read the line
	step   time.Duration // its process's wall-clock step then
}

// jobRun is one run of a process's inner job, from its RUN line to its HALT
// line, or to its process's end if it printed no HALT (killed, or exited
// with the job running). Times are the host's clock.
//
// A killed run ends when SIGKILL was sent (the date taken before it was):
// the process may run on until the kernel ends it, but no store lets
// another process take over before that (on SQLite a candidate must see the
// holder's lock free, which the kernel frees at its death; elsewhere it
// waits out the TTL), and the test sees the death only later, when its
// stdout ends (dead). So a term that started after the kill was sent is no
// overlap, and one that started before it ran while the old process could
// still write.
type jobRun struct {
	holder     string
	token      uint64
	start      time.Time // the inner Start was called
	stopCalled time.Time // the inner Stop was called; zero if never
	end        time.Time // the inner Stop returned, SIGKILL was sent, or (exited) the process was seen dead
	dead       time.Time // killed or exited: when the test saw the process's stdout end; zero otherwise
	how        string    // "halt", "killed", "exited" or "running" (no end: only while the run lasts)
}

// pause is one SIGSTOP..SIGCONT of a process, by the test's clock (the same
// host clock that stamps SQLite rows; PostgreSQL runs on the same host in CI).
type pause struct {
	holder     string
	start, end time.Time
}

// wrote is one WROTE line: holder's write number n, with token, committed.
type wrote struct {
	holder string
	token  uint64
	n      int64
}

// runLog is what a chaos run left for the checker.
type runLog struct {
	rows      []row // in commit order: by file, then seq
	starts    []started
	runs      []jobRun
	pauses    []pause
	deletions []time.Time // when the test deleted the SQLite file
	rollbacks []time.Time // when the test wrote a saved lease row back
	wrote     []wrote
}

// bounds are the timings the checks derive their bounds from.
type bounds struct {
	ttl, retry, writeEvery, hold, margin time.Duration
	// placement is how long a balanced candidate may hold back before it
	// tries (0 without balancing).
	placement time.Duration
	// perTerm is what each term that started between two terms with rows,
	// and wrote none itself (a leader killed at once), may add to their gap:
	// its own TTL and retry.
	perTerm time.Duration
	// perDeletion is what a deletion of the file may add to a gap: the
	// processes exit, wait to be restarted, and start on the new file.
	perDeletion time.Duration
	// resumeStop is how long a paused leader may take, once resumed, to
	// stop its job: its renewal timer is overdue and ends the term at once;
	// the job's write in flight must finish.
	resumeStop time.Duration
}

// base is the bound on a leaderless gap that no pause explains:
// TTL + RetryInterval + write period + hold + placement + margin (hold, 0
// by default, is -chaos.hold: a row's time is read before the transaction
// holds open).
//
// Why: the old leader wrote its last row at most one write period (plus the
// write's own latency) before it crashed, stopped or paused, and had renewed
// its lease before that, so candidates that watch it see it unchanged for its
// TTL at most TTL after the disruption. A candidate retries within
// RetryInterval (jittered down, or woken at the moment its watch completes,
// or at once by a release), and a new leader writes its first row as soon as
// its job starts. The margin covers process scheduling, statement latency
// and the race detector's slowdown.
func (b bounds) base() time.Duration {
	return b.ttl + b.retry + b.writeEvery + b.hold + b.placement + b.margin
}

// gapBound is the bound on the gap [from, to] between two terms that wrote.
//
// A paused leader can hold a database lock through its pause: SQLite's write
// lock if it was inside a fenced transaction (BEGIN IMMEDIATE), the lease
// row's FOR SHARE lock and the rows table's lock on PostgreSQL. Candidates
// then cannot take over until the pause ends, even after the lease could be
// taken: the takeover can come as late as the pause's end + RetryInterval
// instead of TTL + RetryInterval after the last renewal. So a gap that
// overlaps a pause of the old leader may exceed the base bound by the part
// of that pause that is longer than TTL:
//
//	bound = TTL + RetryInterval + write period + margin + max(0, pause − TTL)
//
// Pauses of other processes never extend the bound (the test pauses only
// leaders). Each term that started inside the gap without writing (a leader
// killed at once, in a burst) adds perTerm, and each deletion of the file
// inside the gap adds perDeletion.
func (b bounds) gapBound(holder string, from, to row, in *runLog) (bound time.Duration, why string) {
	var excess time.Duration
	for _, p := range in.pauses {
		if p.holder == holder && p.start.Before(to.at) && p.end.After(from.at) {
			excess = max(excess, p.end.Sub(p.start)-b.ttl)
		}
	}
	bound = b.base() + excess
	if excess > 0 {
		why = fmt.Sprintf("a pause of %s adds %v", holder, excess.Round(time.Millisecond))
	}
	terms := 0
	for _, s := range in.starts {
		if s.token != from.token && s.token != to.token && s.at.After(from.at) && s.at.Before(to.at) {
			terms++
		}
	}
	if terms > 0 {
		bound += time.Duration(terms) * b.perTerm
		why = joinWhy(why, fmt.Sprintf("%d terms without rows", terms))
	}
	dels := 0
	for _, d := range in.deletions {
		if d.After(from.at) && d.Before(to.at) {
			dels++
		}
	}
	if dels > 0 {
		bound += time.Duration(dels) * b.perDeletion
		why = joinWhy(why, fmt.Sprintf("%d file deletions", dels))
	}
	// A lease row written back to an older term ends the leader's term at
	// its next renewal, and candidates watch the older state from when
	// they see it (within a RetryInterval): the gap may last up to base
	// and a RetryInterval from the write-back.
	for _, r := range in.rollbacks {
		if r.After(from.at) && r.Before(to.at) {
			if rb := r.Sub(from.at) + b.base() + b.retry; rb > bound {
				bound, why = rb, joinWhy(why, fmt.Sprintf("a rollback of the lease row %v into the gap", r.Sub(from.at).Round(time.Millisecond)))
			}
		}
	}
	return bound, why
}

func joinWhy(a, b string) string {
	if a == "" {
		return b
	}
	return a + ", " + b
}

// gap is the leaderless time between two terms that both wrote rows.
type gap struct {
	from, to row // the last row of the old term and the first of the new one
	length   time.Duration
	bound    time.Duration
	why      string // what raised the bound above base; "" if nothing
}

// overlap is two job runs of different terms that were under way at once.
type overlap struct {
	first, second jobRun
	length        time.Duration
	excuse        string // why it is no violation: the first holder was paused; "" if it is one
}

// report is what check found.
type report struct {
	rows, terms int // terms that wrote at least one row
	longest     gap // the longest gap; zero if fewer than two terms wrote
	gaps        []gap
	overlaps    []overlap
	violations  []string
}

// check verifies a run. The invariants, each reported as a violation:
//
//  1. Seq strictly increases within each file (rows are read ORDER BY seq).
//  2. Tokens never go back in commit order: no fenced write carrying token
//     T commits after the first write of a token T' > T, within a file and
//     across deletions of the file.
//  3. Each term's rows are contiguous: once a row of another token follows
//     token T's rows, no row carries T again; so across terms, tokens
//     strictly increase.
//  4. One holder per token, and that holder printed "START holder token":
//     the token's rows come from the process the store elected with it.
//  5. No token was started twice (START lines, all processes and files
//     together).
//  6. Every token started on a file is larger than every token started on
//     an earlier file: a deleted file does not lower or reuse tokens.
//  7. Every write a process reported committed (WROTE) is in the rows: no
//     fenced write went to a file nobody reads.
//  8. No two job runs of different terms overlap (from the inner Start to
//     the inner Stop's return, or the process's death), unless the earlier
//     one's process was paused from before the later one started until at
//     most resumeStop before the earlier one stopped (a frozen process
//     cannot stop its job; once resumed it must, at once).
//  9. Every leaderless gap, from the last row of one term to the first row
//     of the next by the rows' times, is at most gapBound.
func check(in runLog, b bounds) report {
	r := report{rows: len(in.rows)}
	violate := func(format string, args ...any) {
		r.violations = append(r.violations, fmt.Sprintf(format, args...))
	}

	startedBy := make(map[uint64]started)
	for _, s := range in.starts {
		if h, ok := startedBy[s.token]; ok {
			violate("token %d started twice: by %s (file %d) and by %s (file %d)", s.token, h.holder, h.file, s.holder, s.file)
			continue
		}
		startedBy[s.token] = s
	}

	// 6: tokens across files.
	var earlier *started // the largest token started on an earlier file
	files := make(map[int]bool)
	for _, s := range in.starts {
		files[s.file] = true
	}
	for _, f := range slices.Sorted(maps.Keys(files)) {
		var lowest, highest *started
		for i := range in.starts {
			s := &in.starts[i]
			if s.file != f {
				continue
			}
			if lowest == nil || s.token < lowest.token {
				lowest = s
			}
			if highest == nil || s.token > highest.token {
				highest = s
			}
		}
		if earlier != nil && lowest.token <= earlier.token {
			violate("file %d issued token %d (%s, %s, wall clock stepped %v) though file %d had issued token %d (%s, %s, wall clock stepped %v): "+
				"tokens were lowered or reused across the deletion of the file",
				f, lowest.token, lowest.holder, tokenTime(lowest.token), lowest.step,
				earlier.file, earlier.token, earlier.holder, tokenTime(earlier.token), earlier.step)
		}
		if earlier == nil || highest.token > earlier.token {
			earlier = highest
		}
	}

	// 1–4, 9: the rows.
	var (
		cur      *row                // last row of the current term
		maxRow   *row                // first row of the largest token so far
		finished = map[uint64]bool{} // tokens whose run of rows has ended
		written  = map[string]bool{} // holder/n of every row
		lowered  = map[[2]uint64]bool{}
	)
	for i := range in.rows {
		w := &in.rows[i]
		written[fmt.Sprintf("%s/%d", w.holder, w.n)] = true
		if cur != nil && w.file == cur.file && w.seq <= cur.seq {
			violate("rows out of order: seq %d after seq %d in file %d", w.seq, cur.seq, w.file)
		}
		if s, ok := startedBy[w.token]; !ok {
			violate("row seq %d: token %d of %s was never started", w.seq, w.token, w.holder)
		} else if s.holder != w.holder {
			violate("row seq %d: token %d written by %s, but %s started it", w.seq, w.token, w.holder, s.holder)
		}
		if maxRow != nil && w.token < maxRow.token && !lowered[[2]uint64{w.token, maxRow.token}] {
			lowered[[2]uint64{w.token, maxRow.token}] = true // once per pair of tokens, not per row
			if w.file != maxRow.file {
				violate("row seq %d of file %d: token %d committed after token %d (seq %d of file %d): tokens were lowered across the deletion of the file",
					w.seq, w.file, w.token, maxRow.token, maxRow.seq, maxRow.file)
			} else {
				violate("row seq %d: token %d committed after the first write of newer token %d (seq %d): a stale write got through the fence",
					w.seq, w.token, maxRow.token, maxRow.seq)
			}
		}
		if maxRow == nil || w.token > maxRow.token {
			maxRow = w
		}
		switch {
		case cur == nil:
			r.terms++
		case w.token != cur.token:
			finished[cur.token] = true
			if finished[w.token] {
				violate("row seq %d: token %d writes again after token %d wrote: its rows are not contiguous", w.seq, w.token, cur.token)
			} else {
				r.terms++
			}
			if w.token < cur.token && w.file == cur.file {
				violate("row seq %d: token %d follows token %d: tokens must increase across terms", w.seq, w.token, cur.token)
			}
			g := gap{from: *cur, to: *w, length: w.at.Sub(cur.at)}
			g.bound, g.why = b.gapBound(cur.holder, *cur, *w, &in)
			if g.length > g.bound {
				violate("leaderless for %v between token %d (%s, last row seq %d at %s) and token %d (%s, first row seq %d at %s): bound %v",
					g.length, cur.token, cur.holder, cur.seq, cur.at.Format(timeFormat),
					w.token, w.holder, w.seq, w.at.Format(timeFormat), g.bound)
			}
			if g.length > r.longest.length {
				r.longest = g
			}
			r.gaps = append(r.gaps, g)
		}
		cur = w
	}

	// 7: lost writes.
	for _, w := range in.wrote {
		if !written[fmt.Sprintf("%s/%d", w.holder, w.n)] {
			violate("write %d of %s (token %d) was reported committed but is in no file: a fenced write was lost", w.n, w.holder, w.token)
		}
	}

	// 8: overlapping job runs.
	runs := slices.Clone(in.runs)
	slices.SortFunc(runs, func(a, b jobRun) int { return a.start.Compare(b.start) })
	for i, a := range runs {
		end := a.end
		if a.how == "running" {
			end = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		for _, c := range runs[i+1:] {
			if a.token == c.token || !c.start.Before(end) {
				continue
			}
			o := overlap{first: a, second: c, length: end.Sub(c.start)}
			for _, p := range in.pauses {
				if p.holder == a.holder && p.start.Before(c.start) && !a.end.After(p.end.Add(b.resumeStop)) {
					o.excuse = fmt.Sprintf("%s was paused from %s to %s", a.holder, p.start.Format(timeFormat), p.end.Format(timeFormat))
				}
			}
			// The double fault the elector documents (LeaseElector.Campaign):
			// a rollback of the row to the state a candidate watched hides
			// the holder's renewals from it, and only the holder's next
			// renewal, if it lands before the watch ends, stops the
			// takeover. A renewal slowed by the busy file can miss that; the
			// fencing then keeps the data safe (check 6: no row of the old
			// token after the new one's).
			for _, rb := range in.rollbacks {
				if o.excuse == "" && !rb.After(c.start) && c.start.Sub(rb) <= b.ttl {
					o.excuse = fmt.Sprintf("the lease row was rolled back at %s, %v before the takeover, and %s's next renewal did not land in time (a double fault: fencing refused its writes)",
						rb.Format(timeFormat), c.start.Sub(rb).Round(time.Millisecond), a.holder)
				}
			}
			r.overlaps = append(r.overlaps, o)
			if o.excuse != "" {
				continue
			}
			switch {
			case a.how == "running":
				violate("job runs overlap: token %d (%s) started at %s while the job of token %d (%s, started %s) was still running at the end",
					c.token, c.holder, c.start.Format(timeFormat), a.token, a.holder, a.start.Format(timeFormat))
			case a.stopCalled.IsZero() || c.start.Before(a.stopCalled):
				violate("two terms at once: the job of token %d (%s) started at %s, %v before %s: the old process could still write",
					c.token, c.holder, c.start.Format(timeFormat), stopOrEnd(a).Sub(c.start), a.ending())
			default:
				violate("job runs overlap: the job of token %d (%s) started at %s, while the inner Stop of token %d (%s) ran from %s to %s (%v): "+
					"it overran the TTL/10 margin between the end of a term and its takeover",
					c.token, c.holder, c.start.Format(timeFormat), a.token, a.holder,
					a.stopCalled.Format(timeFormat), a.end.Format(timeFormat), a.end.Sub(a.stopCalled))
			}
		}
	}
	return r
}

// ending says how r ended, for a violation that began before it did.
func (r jobRun) ending() string {
	switch r.how {
	case "killed":
		return fmt.Sprintf("SIGKILL was sent to the process of token %d (%s) at %s (seen dead at %s)",
			r.token, r.holder, r.end.Format(timeFormat), r.dead.Format(timeFormat))
	case "exited":
		return fmt.Sprintf("the process of token %d (%s) exited (seen at %s) without stopping its job", r.token, r.holder, r.end.Format(timeFormat))
	}
	return fmt.Sprintf("the job of token %d (%s) was told to stop (at %s; it stopped at %s)",
		r.token, r.holder, r.stopCalled.Format(timeFormat), r.end.Format(timeFormat))
}

// stopOrEnd is when the run was told to stop, or ended if it never was.
func stopOrEnd(r jobRun) time.Time {
	if r.stopCalled.IsZero() {
		return r.end
	}
	return r.stopCalled
}

// tokenTime shows a token as the wall-clock time it would be if it was
// floored at a wall clock in microseconds (sqlitelease's new tokens are).
func tokenTime(token uint64) string {
	if token < 1e15 {
		return "a counter"
	}
	return "≈ " + time.UnixMicro(int64(token)).Format("15:04:05.000")
}

const timeFormat = "15:04:05.000"
