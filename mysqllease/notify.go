package mysqllease

import (
	"context"
	"sync"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// Notify implements [elector.Notifier]: while a Notify is active, the Store
// checks every [WithPollInterval] whether a lease of its table was taken or
// released (through any Store), and if so asks for every lease to be read
// again.
func (s *Store) Notify(changed func(elector.Change)) (stop func()) {
	sub := &changed
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return func() {}
	}
	s.subs[sub] = struct{}{}
	if s.stopPoll == nil {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.poll(ctx)
		}()
		s.stopPoll = func() { cancel(); <-done }
	}
	return sync.OnceFunc(func() { s.unsubscribe(sub) })
}

// unsubscribe removes sub (nil: every one, at Close) and, with the last
// one, stops the poll and waits for it.
func (s *Store) unsubscribe(sub *func(elector.Change)) {
	s.mu.Lock()
	if sub == nil {
		clear(s.subs)
	}
	delete(s.subs, sub)
	var stopPoll func()
	if len(s.subs) == 0 {
		stopPoll, s.stopPoll = s.stopPoll, nil
	}
	s.mu.Unlock()
	if stopPoll != nil {
		stopPoll()
	}
}

// pollTimeout bounds one read of the table's mark.
const pollTimeout = 5 * time.Second

// poll reads the table's mark (sqlMark) every interval until ctx ends, and
// asks the subscribers (under s.mu: none whose stop has returned) to read
// every lease when it moved, or on the first read since a start or error.
func (s *Store) poll(ctx context.Context) {
	ticker := time.NewTicker(s.opts.pollInterval)
	defer ticker.Stop()
	var last string // "" before the first read and after a failed one
	for {
		m, err := s.readMark(ctx)
		if err == nil && m != last {
			s.mu.Lock()
			for sub := range s.subs {
				(*sub)(elector.Change{})
			}
			s.mu.Unlock()
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
