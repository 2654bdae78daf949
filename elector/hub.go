package elector

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/leaderaware/leaderaware/internal/clock"
)

// hub watches every lease the waiting candidates of one Store wait on, so
// that they make no store calls of their own.
//
// How it works: each waiting Campaign subscribes to its lease name. One loop
// reads every subscribed name at the shortest poll interval among the
// subscribers (each min(RetryInterval, SafetyMargin(TTL)/2), jittered),
// with one GetMany per maxBatch names when the Store is a BulkReader and one
// Get each otherwise, and reads a name at once when it is newly subscribed
// or the Store's Notifier asks. Each store call is bounded by the least,
// among the subscribers, of the longer of RetryInterval and the margin
// (SafetyMargin(TTL)), within the trust window: a read slower than the
// RetryInterval delays the next poll, and the gap reset below keeps that
// safe; one slower than the margin leaves a gap anyway. A Notifier's known
// states are delivered as they come. Each subscriber gets the latest state
// only, by one rule: a held state older, by (Token, Version), than a held state
// already delivered for that name is dropped (a late read); a free state is
// always delivered (a stale one costs one TryAcquire, a compare-and-set),
// and the state a candidate's compare-and-set was answered with counts as
// the newest, whatever its order. A subscriber is not handed the state it
// already watches again, except as a restart:
//
// Gap reset (the rule is on Campaign): each subscription records the
// clock.Now at the start of each successful read of its name (reads, not a
// Notifier's known states); when a read starts more than the margin after
// the last one, a subscriber whose state is unchanged is handed it again
// with restart set, and its watch starts over. Campaign also asks fresh
// before a watch completes, since reads that fail on deliver nothing. The
// first read counts from the subscribe, just after the candidate's
// compare-and-set was answered with the state: the read at once that
// follows never restarts the watch, one delayed past the margin by failed
// reads does.
type hub struct {
	rt       *storeRuntime
	bulk     BulkReader // the Store's, or nil
	notifier Notifier   // the Store's, or nil
	kick     chan struct{}

	mu      sync.Mutex
	names   map[string]*watchedName
	looping bool
	pending map[string]struct{} // names to read at once
	all     bool                // read every name at once
	// The context of the reads, ended when the last subscriber stops, so
	// that its Campaign, which waits for the loop, waits for no read.
	reads    context.Context
	endReads context.CancelFunc
}

// watchedName is the subscribers of one lease name.
type watchedName struct {
	subs   map[*subscription]struct{}
	newest Lease // the newest held state delivered
}

// subscription is one waiting candidate's watch of its lease.
type subscription struct {
	h      *hub
	name   string
	every  time.Duration // its poll interval
	margin time.Duration // SafetyMargin of its TTL: the longest gap between reads
	bound  time.Duration // the deadline of a read for it (see hub)
	states chan state    // the latest state not yet received
	// Guarded by h.mu:
	seen     Lease     // the state it watches
	lastRead time.Time // the start of its name's last successful read
}

// state is a state handed to a subscriber. restart is set when it is the
// state the subscriber watches, handed again after a gap in the reads.
type state struct {
	Lease
	restart bool
}

func (h *hub) init(rt *storeRuntime) {
	h.rt = rt
	h.bulk, _ = rt.store.(BulkReader)
	h.notifier, _ = rt.store.(Notifier)
	h.kick = make(chan struct{}, 1)
	h.names = map[string]*watchedName{}
	h.pending = map[string]struct{}{}
}

// subscribe starts a watch of name by a candidate with the given
// RetryInterval and TTL that watches seen.
func (h *hub) subscribe(name string, retry, ttl time.Duration, seen Lease) *subscription {
	margin := SafetyMargin(ttl)
	sub := &subscription{
		h: h, name: name, every: min(retry, margin/2), margin: margin, bound: min(max(retry, margin), ttl-margin),
		states: make(chan state, 1), seen: seen, lastRead: clock.Now(),
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.names[name]
	if w == nil {
		w = &watchedName{subs: map[*subscription]struct{}{}}
		h.names[name] = w
	}
	w.subs[sub] = struct{}{}
	w.answered(seen)
	h.pending[name] = struct{}{}
	if h.reads == nil || h.reads.Err() != nil {
		h.reads, h.endReads = context.WithCancel(context.Background())
	}
	if !h.looping {
		h.looping = true
		h.rt.wg.Add(1)
		go h.loop()
	} else {
		kick(h.kick)
	}
	return sub
}

// stop ends the watch.
func (sub *subscription) stop() {
	h := sub.h
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.names[sub.name]
	delete(w.subs, sub)
	if len(w.subs) == 0 {
		delete(h.names, sub.name)
		delete(h.pending, sub.name)
		if len(h.names) == 0 {
			h.endReads()
			kick(h.kick)
		}
	}
}

// saw tells the hub the state the candidate watches now, learned from the
// store's own answer (a TryAcquire's ErrHeld). A held state queued for the
// candidate before that answer is dropped: it would restart the watch of the
// current state, which the hub, having seen, would not hand it again.
func (sub *subscription) saw(l Lease) {
	sub.h.mu.Lock()
	defer sub.h.mu.Unlock()
	sub.seen = l
	sub.h.names[sub.name].answered(l)
	select {
	case q := <-sub.states:
		if q.Token == 0 || q.restart && same(q.Lease, l) {
			sub.states <- q // a free state is taken at once; a restart still holds
		}
	default:
	}
}

// fresh reports whether a read of the name started within the margin: a
// watch may complete only then, since the reset of a gap needs a read.
func (sub *subscription) fresh() bool {
	sub.h.mu.Lock()
	defer sub.h.mu.Unlock()
	return clock.Since(sub.lastRead) <= sub.margin
}

// answered takes l, a held state the store answered a compare-and-set
// with, as the newest, whatever its order: a row rolled back shows an older
// one, and later reads of it must reach the other subscribers.
func (w *watchedName) answered(l Lease) {
	if l.Token != 0 {
		w.newest = l
	}
}

// loop reads the subscribed names until there are none.
func (h *hub) loop() {
	defer h.rt.wg.Done()
	if h.notifier != nil {
		defer h.notifier.Notify(h.changed)()
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var nextPoll time.Time
	for {
		ctx, names, bound, wait, ok := h.plan(&nextPoll)
		if !ok {
			return
		}
		if len(names) > 0 {
			h.read(ctx, names, bound)
			continue
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-h.kick:
		}
	}
}

// plan returns the names to read now, the reads' context and the deadline
// of each store call (see hub), or how long to wait for the next poll; false
// once there are no subscribers.
func (h *hub) plan(nextPoll *time.Time) (ctx context.Context, names []string, bound, wait time.Duration, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.names) == 0 {
		h.looping = false
		return nil, nil, 0, 0, false
	}
	var every time.Duration
	for _, w := range h.names {
		for sub := range w.subs {
			if every == 0 || sub.every < every {
				every = sub.every
			}
			if bound == 0 || sub.bound < bound {
				bound = sub.bound
			}
		}
	}
	now := clock.Now()
	if poll := !now.Before(*nextPoll); poll || h.all {
		if poll {
			*nextPoll = now.Add(jitter(every))
		}
		for name := range h.names {
			names = append(names, name)
		}
	} else {
		for name := range h.pending {
			names = append(names, name)
		}
	}
	clear(h.pending)
	h.all = false
	return h.reads, names, bound, nextPoll.Sub(now), true
}

// read reads names and delivers their states. Each store call is bounded
// by bound, and ends with reads.
func (h *hub) read(reads context.Context, names []string, bound time.Duration) {
	if h.bulk == nil {
		for _, name := range names {
			start := clock.Now()
			ctx, cancel := context.WithTimeout(reads, bound)
			l, err := h.rt.store.Get(ctx, name)
			cancel()
			switch {
			case err == nil:
			case errors.Is(err, ErrNoLease):
				l = Lease{Name: name}
			default:
				continue // the next poll reads it again
			}
			h.mu.Lock()
			h.deliver(name, l, start)
			h.mu.Unlock()
		}
		return
	}
	for len(names) > 0 {
		chunk := names[:min(len(names), maxBatch)]
		names = names[len(chunk):]
		start := clock.Now()
		ctx, cancel := context.WithTimeout(reads, bound)
		got, err := h.bulk.GetMany(ctx, chunk)
		cancel()
		if err != nil || len(got) != len(chunk) {
			continue // the next poll reads them again
		}
		h.mu.Lock()
		for i, name := range chunk {
			h.deliver(name, got[i], start)
		}
		h.mu.Unlock()
	}
}

// changed takes a change from the Store's Notifier.
func (h *hub) changed(c Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case c.Known:
		h.deliver(c.Name, c.State, time.Time{})
		return
	case c.Name == "":
		h.all = true
	default:
		if _, ok := h.names[c.Name]; !ok {
			return
		}
		h.pending[c.Name] = struct{}{}
	}
	kick(h.kick)
}

// deliver hands l, a state of name, to its subscribers by the hub's rule
// (see hub). read is the start of the read that returned l, or zero for a
// Notifier's known state. h.mu is held.
func (h *hub) deliver(name string, l Lease, read time.Time) {
	w := h.names[name]
	if w == nil {
		return
	}
	var gap map[*subscription]bool
	if !read.IsZero() {
		for sub := range w.subs {
			if read.Sub(sub.lastRead) > sub.margin {
				if gap == nil {
					gap = map[*subscription]bool{}
				}
				gap[sub] = true
			}
			sub.lastRead = read
		}
	}
	if l.Token == 0 {
		l = Lease{Name: name}
	} else {
		if older(l, w.newest) {
			return
		}
		w.newest = l
	}
	for sub := range w.subs {
		restart := same(sub.seen, l)
		if restart && (l.Token == 0 || !gap[sub]) {
			continue
		}
		sub.seen = l
		select {
		case <-sub.states: // drop the state it has not received
		default:
		}
		sub.states <- state{l, restart} // never blocks: the buffer is empty and only the hub sends, under h.mu
	}
}

// same reports whether a and b are one state: the same Token and Version.
func same(a, b Lease) bool { return a.Token == b.Token && a.Version == b.Version }

// older reports whether a is an older state than b by (Token, Version).
func older(a, b Lease) bool {
	return a.Token < b.Token || a.Token == b.Token && a.Version < b.Version
}
