// Package fanout is the part of a store's [elector.Notifier] that every
// store shares: it hands the changes of the store's wake-up source to each
// Notify caller, and runs that source only while someone listens.
package fanout

import (
	"context"
	"sync"

	"github.com/leaderaware/leaderaware/elector"
)

// Source runs a store's wake-up source while any Notify is not stopped.
type Source struct {
	prepare func() Run // nil: no wake-up source

	mu     sync.Mutex // held while a change is handed out
	closed bool
	subs   map[*subscriber]struct{}
	cancel context.CancelFunc // of the running source; nil if none
	done   chan struct{}      // closed when it returns
}

type subscriber struct{ changed func(elector.Change) }

// Run is a wake-up source: it runs until ctx ends and calls send for each
// change it learns of.
type Run func(ctx context.Context, send func(elector.Change))

// New returns a Source whose wake-up source is run, or that has none (only
// the changes given to Send) if run is nil.
func New(run Run) *Source {
	if run == nil {
		return Prepared(nil)
	}
	return Prepared(func() Run { return run })
}

// Prepared returns a Source whose wake-up source is the one prepare
// returns, called (under the Source's lock) before each start: what it sets
// up is in place when the Notify that started it returns.
func Prepared(prepare func() Run) *Source {
	return &Source{prepare: prepare, subs: make(map[*subscriber]struct{})}
}

// Send hands c to every Notify callback now: a change the store made
// itself.
func (s *Source) Send(c elector.Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub := range s.subs {
		sub.changed(c)
	}
}

// Notify implements [elector.Notifier]: the first Notify starts the
// source, and the last stop stops it and waits for it to return.
func (s *Source) Notify(changed func(elector.Change)) (stop func()) {
	sub := &subscriber{changed}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return func() {}
	}
	s.subs[sub] = struct{}{}
	if s.cancel == nil && s.prepare != nil {
		s.start()
	}
	return sync.OnceFunc(func() {
		s.mu.Lock()
		delete(s.subs, sub)
		if len(s.subs) > 0 {
			s.mu.Unlock()
			return
		}
		s.stopLocked()
	})
}

// Close stops the source and waits for it; Notify then starts nothing, and
// no change reaches a callback after Close returns.
func (s *Source) Close() {
	s.mu.Lock()
	s.closed = true
	clear(s.subs)
	s.stopLocked()
}

// Running reports whether the source runs.
func (s *Source) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancel != nil
}

// start starts the source; s.mu is held. Its send hands a change to every
// subscriber under s.mu, and nothing once its ctx ended, so that no change
// reaches a subscriber after its stop returned.
func (s *Source) start() {
	run := s.prepare()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.cancel, s.done = cancel, done
	send := func(c elector.Change) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		for sub := range s.subs {
			sub.changed(c)
		}
	}
	go func() {
		defer close(done)
		run(ctx, send)
	}()
}

// stopLocked stops the source, if it runs, unlocks s.mu and waits for the
// source to return.
func (s *Source) stopLocked() {
	cancel, done := s.cancel, s.done
	s.cancel, s.done = nil, nil
	if cancel != nil {
		cancel() // under s.mu: send hands out nothing after this
	}
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}
