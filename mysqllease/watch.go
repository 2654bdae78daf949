package mysqllease

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// A batched read of the watcher may take the poll interval, but at least
// minWatchRead (a busy server) and at most maxWatchRead: a read stuck on a
// dead connection gives up, and the next poll runs on a fresh one.
const (
	minWatchRead = time.Second
	maxWatchRead = 5 * time.Second
)

// watchChunk bounds the names in one statement of a poll.
const watchChunk = 500

// WatchLease implements [elector.LeaseWatcher]. The channel receives the
// current lease of name (the zero Lease when it is free: released, or no
// row) soon after the call and whenever the Store reads a new state of it
// (a new token or version); it holds the latest state only, is never
// closed, and sends never block. Call stop once done. An every of 0 or less
// means [elector.DefaultRetryInterval].
//
// The Store's one poller goroutine follows every watched lease (see
// [Store.WatchRelease]): it reads all of them together, one statement per
// 500 names, at least every `every` and every poll interval
// ([WithPollInterval]). A release through this Store is delivered at once,
// a release elsewhere at the next poll.
func (s *Store) WatchLease(name string, every time.Duration) (states <-chan elector.Lease, stop func()) {
	if every <= 0 {
		every = elector.DefaultRetryInterval
	}
	sub := &watchSub{states: make(chan elector.Lease, 1), every: max(every, elector.MinRetryInterval)}
	return sub.states, s.watch.add(name, sub)
}

// WatchRelease implements [elector.ReleaseWatcher]. The returned channel
// receives a value soon after the lease name is released: at once when it
// is released through this Store, and within one poll interval
// ([WithPollInterval]) when another Store or process releases it (or
// deletes its row). It also receives one if the lease is free when the
// watch starts. Spurious values are possible; the channel is never closed.
// The caller must call stop when it no longer watches.
//
// The first watcher, of WatchRelease or [Store.WatchLease], starts the
// Store's one poller goroutine, and the last stop or [Store.Close] ends it.
// It polls at once when a watcher comes, then every poll interval at most
// (or the shortest `every` of WatchLease, if shorter), each interval drawn
// at random between half of it and all of it, so that polls keep no fixed
// phase against the holders' renewals. A poll reads the rows of all
// watched names on a lease connection with one primary-key SELECT per 500
// names, whatever the number of watchers; nothing runs while nobody
// watches. After Close the channel never receives.
func (s *Store) WatchRelease(name string) (released <-chan struct{}, stop func()) {
	sub := &watchSub{released: make(chan struct{}, 1), every: s.opts.poll}
	return sub.released, s.watch.add(name, sub)
}

// watcher holds the watchers of a Store, of both kinds, and its poller.
// mu guards every field but s, wg and statements.
type watcher struct {
	s *Store

	mu     sync.Mutex
	byName map[string]*watchedName
	subs   int                // watchers in byName
	cancel context.CancelFunc // stops the poller; nil when none runs
	kick   chan struct{}      // buffered 1: poll now
	closed bool               // set by close: start nothing
	// seq counts the marks that order the poller's reads and the local
	// releases (see mark).
	seq uint64

	wg         sync.WaitGroup // the poller, and one that is still ending
	statements atomic.Int64   // poll statements so far, for tests
}

// watchedName is a lease name and its watchers.
type watchedName struct {
	subs map[*watchSub]struct{}
	// releases counts the releases through this Store of the name, so that
	// a poll that read it before one of them does not deliver its older
	// state.
	releases uint64
	// readAt is the mark of the poll whose read of the name was delivered
	// last, so that a local release that wrote before that poll began is
	// not delivered after it.
	readAt uint64
}

// watchSub is one WatchLease (states) or WatchRelease (released) call.
type watchSub struct {
	states   chan elector.Lease
	released chan struct{}
	every    time.Duration
	seen     bool       // last is set
	last     leaseState // the state last delivered
}

// leaseState identifies a state of a lease row: every write changes its
// version, and a row deleted and made again has a new token.
type leaseState struct {
	token, version uint64
	free           bool // released, or no row (token and version 0)
}

// deliver hands the state st (whose lease is l, zero if free) to sub if it
// is the first or another one than sub got last: the lease itself on
// states, replacing one sub has not received yet; a value on released if
// it is free. An older state is delivered too (a row rolled back shows
// one): the callers keep the order of reads and writes (see mark). w.mu is
// held, which makes the send never block: all senders hold it, so the
// buffer is empty after the drain.
func (sub *watchSub) deliver(st leaseState, l elector.Lease) {
	if sub.seen && sub.last == st {
		return
	}
	sub.seen, sub.last = true, st
	switch {
	case sub.states != nil:
		sub.drain()
		sub.states <- l
	case st.free:
		select {
		case sub.released <- struct{}{}:
		default:
		}
	}
}

// drain empties sub's channel. w.mu is held.
func (sub *watchSub) drain() {
	select {
	case <-sub.states:
	case <-sub.released:
	default:
	}
}

func (w *watcher) init(s *Store) {
	w.s = s
	w.byName = make(map[string]*watchedName)
}

// add adds sub as a watcher of name, starts the poller if none runs, makes
// it poll now, and returns the stop function.
func (w *watcher) add(name string, sub *watchSub) func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return func() {}
	}
	wn := w.byName[name]
	if wn == nil {
		wn = &watchedName{subs: make(map[*watchSub]struct{})}
		w.byName[name] = wn
	}
	wn.subs[sub] = struct{}{}
	w.subs++
	if w.cancel == nil {
		ctx, cancel := context.WithCancel(context.Background())
		w.cancel, w.kick = cancel, make(chan struct{}, 1)
		w.wg.Add(1)
		go w.poll(ctx, w.kick)
	}
	select { // the first state promptly
	case w.kick <- struct{}{}:
	default:
	}
	return sync.OnceFunc(func() { w.remove(name, sub) })
}

// remove removes sub, and stops the poller with the last watcher.
func (w *watcher) remove(name string, sub *watchSub) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wn := w.byName[name]
	if wn == nil {
		return
	}
	if _, ok := wn.subs[sub]; !ok {
		return
	}
	delete(wn.subs, sub)
	w.subs--
	if len(wn.subs) == 0 {
		delete(w.byName, name)
	}
	if w.subs == 0 && w.cancel != nil {
		w.cancel()
		w.cancel = nil
	}
}

// mark returns a new mark: a poll takes one before its read, a release
// after its write, so that a release whose mark is below the readAt of its
// name wrote before that delivered read began.
func (w *watcher) mark() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq++
	return w.seq
}

// released delivers st, the state that a release through this Store just
// wrote (its mark taken after the write), to the watchers of name at once,
// unless a poll that began after the write delivered a state already.
func (w *watcher) released(name string, st leaseState, at uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wn := w.byName[name]
	if wn == nil {
		return
	}
	wn.releases++
	if wn.readAt > at {
		return
	}
	for sub := range wn.subs {
		sub.deliver(st, elector.Lease{})
	}
}

// close stops the poller and waits for it; nothing is delivered or started
// afterwards.
func (w *watcher) close() {
	w.mu.Lock()
	w.closed = true
	for _, wn := range w.byName {
		for sub := range wn.subs {
			sub.drain() // nothing is received after Close
		}
	}
	clear(w.byName)
	w.subs = 0
	if w.cancel != nil {
		w.cancel()
		w.cancel = nil
	}
	w.mu.Unlock()
	w.wg.Wait()
}

// watchedRow is what a poll read of a watched name.
type watchedRow struct {
	state leaseState
	lease elector.Lease // zero if free
}

// poll is the poller: it reads every watched lease until ctx ends, at once
// when kicked, and delivers what it read. A failed read delivers nothing;
// the next poll reads again.
func (w *watcher) poll(ctx context.Context, kick <-chan struct{}) {
	defer w.wg.Done()
	var (
		names  []string
		counts []uint64
	)
	timer := time.NewTimer(w.s.opts.poll)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
			timer.Stop()
		case <-timer.C:
		}
		names, counts = names[:0], counts[:0]
		every := w.s.opts.poll
		w.mu.Lock()
		w.seq++
		readAt := w.seq
		for name, wn := range w.byName {
			names = append(names, name)
			counts = append(counts, wn.releases)
			for sub := range wn.subs {
				every = min(every, sub.every)
			}
		}
		w.mu.Unlock()

		start := time.Now()
		found, err := w.read(ctx, names, min(max(every, minWatchRead), maxWatchRead))
		if err == nil {
			w.mu.Lock()
			if ctx.Err() == nil { // nothing after the last stop or Close
				for i, name := range names {
					wn := w.byName[name]
					if wn == nil || wn.releases != counts[i] {
						continue // unwatched, or released since the read began
					}
					row, ok := found[name]
					if !ok {
						row.state.free = true // no row
					}
					wn.readAt = readAt
					for sub := range wn.subs {
						sub.deliver(row.state, row.lease)
					}
				}
			}
			w.mu.Unlock()
		}
		if ctx.Err() != nil {
			return
		}
		// The next poll is due a jittered interval after this one began,
		// or after it failed.
		next := jitter(every)
		if err == nil {
			next = max(0, next-time.Since(start))
		}
		timer.Reset(next)
	}
}

// read reads the rows of names on the lease pool, one statement per
// watchChunk names, within limit.
func (w *watcher) read(ctx context.Context, names []string, limit time.Duration) (map[string]watchedRow, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	found := make(map[string]watchedRow, len(names))
	args := make([]any, 0, min(len(names), watchChunk))
	for start := 0; start < len(names); start += watchChunk {
		chunk := names[start:min(start+watchChunk, len(names))]
		args = args[:0]
		for _, name := range chunk {
			args = append(args, name)
		}
		query := w.s.sqlWatch + "?" + strings.Repeat(", ?", len(chunk)-1) + ")"
		err := w.s.leases.do(ctx, func(q querier) error {
			w.statements.Add(1)
			rows, err := q.QueryContext(ctx, query, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				l, released, err := scanLease(rows)
				if err != nil {
					return err
				}
				row := watchedRow{state: leaseState{token: l.Token, version: l.Version, free: released}}
				if !released {
					row.lease = l
				}
				found[l.Name] = row
			}
			return rows.Err()
		})
		if err != nil {
			return nil, err
		}
	}
	return found, nil
}

// jitter returns a duration in [d/2, d].
func jitter(d time.Duration) time.Duration {
	half := d / 2
	return half + rand.N(d-half+1)
}
