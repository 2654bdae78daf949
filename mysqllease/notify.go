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
		s.stopPoll = s.startPoll()
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

// startPoll starts the goroutine of poll and returns what stops it and
// waits for it.
func (s *Store) startPoll() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.poll(ctx)
	}()
	return func() { cancel(); <-done }
}

// pollTimeout bounds one read of the table's mark.
const pollTimeout = 5 * time.Second

// mark is what poll reads: the sums of the tokens and of the released
// flags over the lease table, as decimal strings. Every acquire raises a
// row's token, and every release sets a flag without touching the tokens,
// so between two reads any acquire or release moves the mark; renewals do
// not. The read scans the table: cheap up to many thousands of leases.
type mark struct{ tokens, released string }

// poll reads the mark every interval until ctx ends and asks for a read of
// every lease when it moved. The first read, and the first after a failed
// one, asks too: a change may have come before it unseen.
func (s *Store) poll(ctx context.Context) {
	ticker := time.NewTicker(s.opts.pollInterval)
	defer ticker.Stop()
	var last *mark
	for {
		m, err := s.readMark(ctx)
		switch {
		case err != nil:
			last = nil
		case last == nil || m != *last:
			last = &m
			s.notify(elector.Change{})
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func (s *Store) readMark(ctx context.Context) (mark, error) {
	ctx, cancel := context.WithTimeout(ctx, pollTimeout)
	defer cancel()
	var m mark
	err := s.leases.do(ctx, func(q querier) error {
		return q.QueryRowContext(ctx, s.sqlMark).Scan(&m.tokens, &m.released)
	})
	return m, err
}

// notify tells every subscriber of c. Holding s.mu, it never calls one
// whose stop has returned.
func (s *Store) notify(c elector.Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub := range s.subs {
		(*sub)(c)
	}
}
