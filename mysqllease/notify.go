package mysqllease

import (
	"context"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// Notify implements [elector.Notifier]: while a Notify is active, the Store
// checks every [WithPollInterval] whether a lease of its table was taken or
// released (through any Store), and if so asks for every lease to be read
// again.
func (s *Store) Notify(changed func(elector.Change)) (stop func()) {
	return s.changes.Notify(changed)
}

// pollTimeout bounds one read of the table's mark.
const pollTimeout = 5 * time.Second

// poll reads the table's mark (sqlMark) every interval until ctx ends, and
// sends a request to read every lease when it moved, or on the first read
// since a start or error.
func (s *Store) poll(ctx context.Context, send func(elector.Change)) {
	ticker := time.NewTicker(s.opts.pollInterval)
	defer ticker.Stop()
	var last string // "" before the first read and after a failed one
	for {
		m, err := s.readMark(ctx)
		if err == nil && m != last {
			send(elector.Change{})
		}
		last = m
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func (s *Store) readMark(ctx context.Context) (m string, err error) {
	ctx, cancel := context.WithTimeout(ctx, pollTimeout)
	defer cancel()
	err = s.leases.do(ctx, func(q querier) error { return q.QueryRowContext(ctx, s.sqlMark).Scan(&m) })
	return m, err
}
