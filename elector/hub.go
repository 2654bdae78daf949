package elector

import (
	"context"
	"errors"
	"sync"
	"time"
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
// states are delivered as they come, and so are the terms acquired and
// resigned through the same Store (see tell), which a Store without a
// Notifier would otherwise show only at the next poll. Each subscriber gets
// the latest state only, by one rule: a held state older, by (Token,
// Version), than a held state already delivered for that name is dropped (a
// late read); a free state is always delivered (a stale one costs one
// TryAcquire, a compare-and-set), and the state a candidate's
// compare-and-set was answered with counts as the newest, whatever its
// order. A subscriber is not handed the state it already watches again,
// except as a restart:
//
// Gap reset (the rule is on Campaign): each subscription records the
// clock.Now at the start of each successful read of its name (reads, not
// known states); when a read starts more than the margin after
// the last one, a subscriber whose state is unchanged is handed it again
// with restart set, and its watch starts over. Campaign also asks fresh
// before a watch completes, since reads that fail on deliver nothing. The
// first read counts from the subscribe, just after the candidate's
// compare-and-set was answered with the state: the read at once that
// follows never restarts the watch, one delayed past the margin by failed
// reads does.
//
// Pushes as reads: when the Store is a CompleteNotifier, the loop calls
// Sync every SafetyMargin(TTL)/2 (jittered to half) among the candidates,
// and a Sync that succeeds counts as a read of every name, started when the
// Sync did, for each candidate whose last read was planned since the last
// possible miss (a Change with Name "" and Known false, or the start of
// Notify; counted in breaks) with none during the Sync: every write since
// that read was pushed, so the state it watches stood. While the last
// Sync counted and the last read of every name, planned since the last
// miss, succeeded, the loop polls every RetryInterval only; otherwise every
// min(RetryInterval, SafetyMargin(TTL)/2) as above. After a miss it reads
// every name before it Syncs again.
//
// Leader watches (LeaseElector.WatchLeader) subscribe too, for as long as
// they run, the term of their own elector included; they never take a
// lease over, so they poll every RetryInterval and need no gap reset. The loop calls each, between reads, with each change of holder or
// token. Reads are numbered: a read that began before the last known state
// (a Notifier's or a tell) reports nothing unless it shows a newer held
// state, since it would report a change and, at the next read, its undoing.
type hub struct {
	rt       *storeRuntime
	bulk     BulkReader       // the Store's, or nil
	notifier Notifier         // the Store's, or nil
	complete CompleteNotifier // the Store's, or nil
	kick     chan struct{}

	mu      sync.Mutex
	names   map[string]*watchedName
	looping bool
	pending map[string]struct{} // names to read at once
	all     bool                // read every name at once
	planned uint64              // reads planned so far
	breaks  uint64              // possible misses of a CompleteNotifier so far, from 1
	// breaks when the read in flight was planned, and whether it reads
	// every name; when the last full read that succeeded was planned;
	// whether the last Sync counted, and when the last that counted began,
	// with breaks then (see pushes as reads).
	planBreaks, pollBreaks uint64
	fullRead, synced       bool
	syncedAt               time.Time
	syncBreaks             uint64
	// The least, among the subscribers, of the intervals and bounds plan
	// uses; recomputed when they change.
	timings hubTimings
	reports []report // leader changes for the loop to report
	// The context of the reads, ended when the last subscriber stops, so
	// that its Campaign, which waits for the loop, waits for no read.
	reads    context.Context
	endReads context.CancelFunc
}

// hubTimings are the least intervals and bounds among the subscribers (see
// plan); ok is false when they must be computed again.
type hubTimings struct {
	every, retry, sync, bound time.Duration
	ok                        bool
}

// report is a leader change for a leader watch (see subscription.report).
type report struct {
	sub *subscription
	l   Lease
}

// watchedName is the subscribers of one lease name.
type watchedName struct {
	subs    map[*subscription]struct{}
	newest  Lease  // the newest held state delivered
	knownAt uint64 // hub.planned at the last known state
}

// subscription is one waiting candidate's watch of its lease, or a leader
// watch.
type subscription struct {
	h      *hub
	name   string
	every  time.Duration // its poll interval
	retry  time.Duration // its RetryInterval: its poll interval while Syncs count (see hub)
	margin time.Duration // SafetyMargin of its TTL: the longest gap between reads
	bound  time.Duration // the deadline of a read for it (see hub)
	states chan state    // the latest state not yet received; nil for a leader watch
	// Guarded by h.mu:
	seen       Lease     // the state it watches
	lastRead   time.Time // the start of its name's last successful read (see read for Syncs)
	readBreaks uint64    // hub.breaks when that read was planned; 0 before the first

	// A leader watch (see LeaseElector.WatchLeader) has report, which the
	// loop calls with each change of holder or token, in order.
	report   func(Lease)
	reported Lease      // the last state queued for report; guarded by h.mu
	any      bool       // whether one was; guarded by h.mu
	callMu   sync.Mutex // held while report runs
	stopped  bool       // no more reports; guarded by callMu
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
	h.complete, _ = rt.store.(CompleteNotifier)
	h.breaks = 1
	h.kick = make(chan struct{}, 1)
	h.names = map[string]*watchedName{}
	h.pending = map[string]struct{}{}
}

// subscribe starts a watch of name, with the given RetryInterval and TTL,
// by a candidate that watches seen, or, with a non-nil report, a leader
// watch.
func (h *hub) subscribe(name string, retry, ttl time.Duration, seen Lease, report func(Lease)) *subscription {
	margin := SafetyMargin(ttl)
	sub := &subscription{
		h: h, name: name, every: retry, retry: retry, margin: margin, bound: min(max(retry, margin), ttl-margin),
		seen: seen, lastRead: h.rt.clock.Now(), report: report,
	}
	if report == nil { // a candidate: see the gap reset
		sub.every = min(retry, margin/2)
		sub.states = make(chan state, 1)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.names[name]
	if w == nil {
		w = &watchedName{subs: map[*subscription]struct{}{}}
		h.names[name] = w
	}
	w.subs[sub] = struct{}{}
	h.timings.ok = false
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

// stop ends the watch; a leader watch reports nothing once it returns.
func (sub *subscription) stop() {
	sub.unsubscribe()
	if sub.report != nil {
		sub.callMu.Lock()
		sub.stopped = true
		sub.callMu.Unlock()
	}
}

func (sub *subscription) unsubscribe() {
	h := sub.h
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.names[sub.name]
	delete(w.subs, sub)
	h.timings.ok = false
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
	return sub.h.rt.clock.Now().Sub(sub.readStart()) <= sub.margin
}

// readStart is read for a caller that does not hold h.mu.
func (sub *subscription) readStart() time.Time {
	sub.h.mu.Lock()
	defer sub.h.mu.Unlock()
	return sub.read()
}

// read returns the start of the last read of the name for sub: its last
// successful read, or a later Sync that counts for it. h.mu is held.
func (sub *subscription) read() time.Time {
	h := sub.h
	if sub.report == nil && sub.readBreaks == h.syncBreaks && h.syncedAt.After(sub.lastRead) {
		return h.syncedAt
	}
	return sub.lastRead
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
		h.mu.Lock()
		h.breaks++ // writes before Notify were not pushed
		h.mu.Unlock()
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var polls polls
	for {
		h.report()
		ctx, names, seq, bound, wait, sync, ok := h.plan(&polls)
		if !ok {
			return
		}
		if sync {
			h.sync(ctx, bound)
			continue
		}
		if len(names) > 0 {
			h.read(ctx, names, seq, bound)
			continue
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-h.kick:
		}
	}
}

// report makes the leader watches' reports queued so far, in order.
func (h *hub) report() {
	h.mu.Lock()
	reports := h.reports
	h.reports = nil
	h.mu.Unlock()
	for _, r := range reports {
		r.sub.callMu.Lock()
		if !r.sub.stopped {
			r.sub.report(r.l)
		}
		r.sub.callMu.Unlock()
	}
}

// polls is the loop's schedule: the start of the last poll of every name,
// and when the next poll and the next Sync are due.
type polls struct{ last, next, nextSync time.Time }

// plan returns the names to read now, the reads' context, the read's
// sequence number and the deadline of each store call (see hub), or
// whether to Sync now, or how long to wait for the next poll or Sync; false
// once there are no subscribers.
func (h *hub) plan(p *polls) (ctx context.Context, names []string, seq uint64, bound, wait time.Duration, sync, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.names) == 0 {
		h.looping = false
		h.reports = nil // of stopped watches
		return nil, nil, 0, 0, 0, false, false
	}
	t := h.timingsNow()
	every, syncEvery, bound := t.every, t.sync, t.bound
	if h.synced && h.pollBreaks == h.breaks {
		every = t.retry // every name was read since the last miss: Syncs count
	}
	now := h.rt.clock.Now()
	if syncEvery > 0 && !h.all { // after a miss, read first (see read)
		if !now.Before(p.nextSync) {
			p.nextSync = now.Add(jitter(syncEvery))
			return h.reads, nil, 0, bound, 0, true, true
		}
	}
	if p.next.Sub(p.last) > every { // a Sync failed: poll sooner
		p.next = p.last.Add(jitter(every))
	}
	poll := !now.Before(p.next)
	if h.fullRead = poll || h.all; h.fullRead {
		if poll {
			p.last, p.next = now, now.Add(jitter(every))
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
	if len(names) > 0 {
		h.planned++
		h.planBreaks = h.breaks
	}
	wait = p.next.Sub(now)
	if syncEvery > 0 {
		wait = min(wait, p.nextSync.Sub(now))
	}
	return h.reads, names, h.planned, bound, wait, false, true
}

// timingsNow returns h.timings, computed again if the subscribers changed.
// h.mu is held.
func (h *hub) timingsNow() hubTimings {
	if h.timings.ok {
		return h.timings
	}
	var t hubTimings
	least := func(d *time.Duration, v time.Duration) {
		if *d == 0 || v < *d {
			*d = v
		}
	}
	for _, w := range h.names {
		for sub := range w.subs {
			least(&t.every, sub.every)
			least(&t.bound, sub.bound)
			if sub.report == nil {
				least(&t.retry, sub.retry)
				if h.complete != nil {
					least(&t.sync, sub.margin/2)
				}
			} else {
				least(&t.retry, sub.every)
			}
		}
	}
	t.ok = true
	h.timings = t
	return t
}

// sync calls the Store's Sync, bounded by bound, and counts it as a read of
// every name for each candidate it may count for (see pushes as reads).
func (h *hub) sync(reads context.Context, bound time.Duration) {
	h.mu.Lock()
	breaks := h.breaks
	h.mu.Unlock()
	start := h.rt.clock.Now()
	ctx, cancel := context.WithTimeout(reads, bound)
	err := h.complete.Sync(ctx)
	cancel()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.synced = err == nil && h.breaks == breaks
	if h.synced {
		h.syncedAt, h.syncBreaks = start, breaks
	}
}

// read reads names and delivers their states, as read number seq. Each
// store call is bounded by bound, and ends with reads.
func (h *hub) read(reads context.Context, names []string, seq uint64, bound time.Duration) {
	failed := false
	defer func() {
		h.mu.Lock()
		if h.fullRead && !failed {
			h.pollBreaks = h.planBreaks
		}
		h.mu.Unlock()
	}()
	if h.bulk == nil {
		for _, name := range names {
			start := h.rt.clock.Now()
			ctx, cancel := context.WithTimeout(reads, bound)
			l, err := h.rt.store.Get(ctx, name)
			cancel()
			switch {
			case err == nil:
			case errors.Is(err, ErrNoLease):
				l = Lease{Name: name}
			default:
				failed = true
				continue // the next poll reads it again
			}
			h.mu.Lock()
			h.deliver(name, l, seq, start)
			h.mu.Unlock()
		}
		return
	}
	for len(names) > 0 {
		chunk := names[:min(len(names), maxBatch)]
		names = names[len(chunk):]
		start := h.rt.clock.Now()
		ctx, cancel := context.WithTimeout(reads, bound)
		got, err := h.bulk.GetMany(ctx, chunk)
		cancel()
		if err != nil || len(got) != len(chunk) {
			failed = true
			continue // the next poll reads them again
		}
		h.mu.Lock()
		for i, name := range chunk {
			h.deliver(name, got[i], seq, start)
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
		h.deliver(c.Name, c.State, 0, time.Time{})
		if len(h.reports) > 0 {
			kick(h.kick)
		}
		return
	case c.Name == "":
		h.all = true
		h.breaks++
	default:
		if _, ok := h.names[c.Name]; !ok {
			return
		}
		h.pending[c.Name] = struct{}{}
	}
	kick(h.kick)
}

// deliver hands l, a state of name, to its subscribers by the hub's rule
// (see hub), and queues a report for each leader watch whose holder or token
// it changes. seq is the number of the read that returned l and start the
// clock.Now it began at, or 0 and zero for a known state (a Notifier's or a
// tell). h.mu is held.
func (h *hub) deliver(name string, l Lease, seq uint64, start time.Time) {
	w := h.names[name]
	if w == nil {
		return
	}
	var gap map[*subscription]bool
	if !start.IsZero() {
		for sub := range w.subs {
			if start.Sub(sub.read()) > sub.margin {
				if gap == nil {
					gap = map[*subscription]bool{}
				}
				gap[sub] = true
			}
			sub.lastRead, sub.readBreaks = start, h.planBreaks
		}
	}
	// A read that began before the last known state is stale unless it
	// shows a newer held state: leader watches are not told of it.
	stale := seq != 0 && seq <= w.knownAt && (l.Token == 0 || !older(w.newest, l))
	if seq == 0 {
		w.knownAt = h.planned
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
		if sub.report != nil {
			if !stale && (!sub.any || sub.reported.Holder != l.Holder || sub.reported.Token != l.Token) {
				sub.any, sub.reported = true, l
				h.reports = append(h.reports, report{sub, l})
			}
			continue
		}
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
