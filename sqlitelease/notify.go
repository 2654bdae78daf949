package sqlitelease

import (
	"context"
	"time"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/fanout"
)

// Notify implements [elector.Notifier]. A lease acquired or released through
// this Store is pushed by name at once. Changes by other Stores are pushed
// as "read everything again": on Linux when the liveness file says that a
// term began or ended or that a process closed the file (perhaps by dying,
// see GetMany), otherwise when the file's counters of new and released
// terms change, read every watch interval ([WithWatchInterval]).
func (s *Store) Notify(changed func(elector.Change)) (stop func()) {
	return s.changes.Notify(changed)
}

// marksSQL reads the two counters that triggers keep (schema version 4): the
// token high-water mark, which every new term raises, and the count of
// released terms. Renewals change neither.
const marksSQL = `SELECT
	coalesce((SELECT value FROM ` + metaTable + ` WHERE key = '` + highWaterKey + `'), 0),
	coalesce((SELECT value FROM ` + metaTable + ` WHERE key = '` + releasesKey + `'), 0)`

// closeRetests are the delays after a process closed the liveness file at
// which wake pushes again: the kernel reports the close a moment before it
// drops the locks of the closing descriptor, later still if the dying
// process is descheduled in between.
var closeRetests = []time.Duration{time.Millisecond, 4 * time.Millisecond, 16 * time.Millisecond, 64 * time.Millisecond, 256 * time.Millisecond}

// wake starts watching the liveness file and returns the wake source, run
// while anyone is notified: it pushes "read everything again" on each event
// of the liveness file (and after a close, again at closeRetests), and when
// the counters of marksSQL, read every watch interval, changed.
func (s *Store) wake() fanout.Run {
	events, err := s.live.events()
	if err != nil {
		s.warnedWake.Do(func() {
			s.cfg.log().Warn("sqlitelease: cannot watch the liveness file; changes by other processes are seen every watch interval",
				"interval", s.cfg.watchInterval, "err", err)
		})
	}
	return func(ctx context.Context, send func(elector.Change)) {
		defer events.stop()
		s.wakeLoop(ctx, events, send)
	}
}

func (s *Store) wakeLoop(ctx context.Context, events *fileEvents, send func(elector.Change)) {
	timer := time.NewTimer(s.cfg.watchInterval)
	defer timer.Stop()
	var last [2]int64
	read := false
	var retests []time.Time
	for {
		push := false
		select {
		case <-ctx.Done():
			return
		case <-events.wait():
			push = true
			if events.tookClose() {
				retests = retests[:0]
				for _, d := range closeRetests {
					retests = append(retests, time.Now().Add(d))
				}
			}
		case <-timer.C:
			var m [2]int64
			err := s.withLeaseRead(ctx, func(lc *leaseConn) error {
				return lc.conn.QueryRowContext(ctx, marksSQL).Scan(&m[0], &m[1])
			})
			push = err == nil && read && m != last
			if err == nil {
				last, read = m, true
			}
		}
		now := time.Now()
		for len(retests) > 0 && !retests[0].After(now) {
			retests, push = retests[1:], true
		}
		if push {
			send(elector.Change{})
		}
		next := s.cfg.watchInterval
		if len(retests) > 0 {
			next = min(next, retests[0].Sub(now))
		}
		timer.Reset(next) // Go 1.23 timers: no stale tick survives Reset
	}
}
