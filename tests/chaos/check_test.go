//go:build linux

package chaos

import (
	"fmt"
	"time"
)

// row is one row a leader wrote through a fenced write.
type row struct {
	seq    int64     // assigned at insert; follows commit order (see below)
	token  uint64    // the writer's fencing token
	holder string    // the writer's holder name
	at     time.Time // SQLite: the writer's clock inside the transaction; PostgreSQL: clock_timestamp() at the insert
}

// Commit order. On SQLite every fenced write holds the file's write lock from
// BEGIN IMMEDIATE to COMMIT, so AUTOINCREMENT order is commit order. On
// PostgreSQL an identity value is taken at insert, not at commit; chaosproc
// therefore takes a self-conflicting table lock (SHARE ROW EXCLUSIVE) before
// it inserts, so the writers' transactions are serialized and identity order
// is commit order there too.

// started is one START line: holder began the term token.
type started struct {
	holder string
	token  uint64
}

// pause is one SIGSTOP..SIGCONT of a process, by the test's clock (the same
// host clock that stamps SQLite rows; PostgreSQL runs on the same host in CI).
type pause struct {
	holder     string
	start, end time.Time
}

// bounds are the timings the gap check derives its bound from.
type bounds struct {
	ttl, retry, writeEvery, hold, margin time.Duration
}

// base is the bound on a leaderless gap that no pause explains:
// TTL + RetryInterval + write period + hold + margin (hold, 0 by default,
// is -chaos.hold: a row's time is read before the transaction holds open).
//
// Why: the old leader wrote its last row at most one write period (plus the
// write's own latency) before it crashed, stopped or paused, and had renewed
// its lease before that, so the lease expires at most TTL after the
// disruption. A candidate retries within RetryInterval (jittered down, or
// woken at once by a release), and a new leader writes its first row as
// soon as its job starts. The margin covers process scheduling, statement
// latency and the race detector's slowdown.
func (b bounds) base() time.Duration { return b.ttl + b.retry + b.writeEvery + b.hold + b.margin }

// gapBound is the bound on the gap [from, to] after a term of holder.
//
// A paused leader can hold a database lock through its pause: SQLite's write
// lock if it was inside a fenced transaction (BEGIN IMMEDIATE), the lease
// row's FOR SHARE lock and the rows table's lock on PostgreSQL. Candidates
// then cannot take over until the pause ends, even after the lease expired:
// the takeover can come as late as the pause's end + RetryInterval instead
// of the lease's expiry + RetryInterval. So a gap that overlaps a pause of
// the old leader may exceed the base bound by the part of that pause that
// is longer than TTL:
//
//	bound = TTL + RetryInterval + write period + margin + max(0, pause − TTL)
//	      = max(TTL, pause) + RetryInterval + write period + margin
//
// Pauses of other processes never extend the bound (the test pauses only
// leaders).
func (b bounds) gapBound(holder string, from, to time.Time, pauses []pause) time.Duration {
	var excess time.Duration
	for _, p := range pauses {
		if p.holder == holder && p.start.Before(to) && p.end.After(from) {
			excess = max(excess, p.end.Sub(p.start)-b.ttl)
		}
	}
	return b.base() + excess
}

// gap is the leaderless time between two terms that both wrote rows.
type gap struct {
	from, to     row // the last row of the old term and the first of the new one
	length       time.Duration
	bound        time.Duration
	pauseExtends bool // a pause of the old leader raised the bound
}

// report is what check found.
type report struct {
	rows, terms int // terms that wrote at least one row
	longest     gap // the longest gap; zero if fewer than two terms wrote
	gaps        []gap
	violations  []string
}

// check verifies the rows, read in seq order, against the START lines and
// the pauses. The invariants, each reported as a violation:
//
//  1. Seq strictly increases (the rows are read ORDER BY seq).
//  2. Tokens never go back in commit order: no fenced write carrying token
//     T commits after the first write of a token T' > T. Equivalently, the
//     token sequence in seq order is non-decreasing.
//  3. Each term's rows are contiguous: once a row of another token follows
//     token T's rows, no row carries T again; so across terms, tokens
//     strictly increase.
//  4. One holder per token, and that holder printed "START holder token":
//     the token's rows come from the process the store elected with it.
//  5. No token was started twice (START lines, all processes together).
//  6. Every leaderless gap, from the last row of one term to the first row
//     of the next by the rows' times, is at most gapBound.
func check(rows []row, starts []started, pauses []pause, b bounds) report {
	r := report{rows: len(rows)}
	violate := func(format string, args ...any) {
		r.violations = append(r.violations, fmt.Sprintf(format, args...))
	}

	startedBy := make(map[uint64]string)
	for _, s := range starts {
		if h, ok := startedBy[s.token]; ok {
			violate("token %d started twice: by %s and by %s", s.token, h, s.holder)
			continue
		}
		startedBy[s.token] = s.holder
	}

	var (
		cur      *row                // last row of the current term
		maxRow   *row                // first row of the largest token so far
		finished = map[uint64]bool{} // tokens whose run of rows has ended
	)
	for i := range rows {
		w := &rows[i]
		if cur != nil && w.seq <= cur.seq {
			violate("rows out of order: seq %d after seq %d", w.seq, cur.seq)
		}
		if h, ok := startedBy[w.token]; !ok {
			violate("row seq %d: token %d of %s was never started", w.seq, w.token, w.holder)
		} else if h != w.holder {
			violate("row seq %d: token %d written by %s, but %s started it", w.seq, w.token, w.holder, h)
		}
		if maxRow != nil && w.token < maxRow.token {
			violate("row seq %d: token %d committed after the first write of newer token %d (seq %d): a stale write got through the fence",
				w.seq, w.token, maxRow.token, maxRow.seq)
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
			if w.token < cur.token {
				violate("row seq %d: token %d follows token %d: tokens must increase across terms", w.seq, w.token, cur.token)
			}
			g := gap{from: *cur, to: *w, length: w.at.Sub(cur.at),
				bound: b.gapBound(cur.holder, cur.at, w.at, pauses)}
			g.pauseExtends = g.bound > b.base()
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
	return r
}

const timeFormat = "15:04:05.000"
