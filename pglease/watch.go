package pglease

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// A batched read of the lease watcher may take the poll interval, but at
// least minWatchRead (a busy server) and at most maxWatchRead: a read stuck
// on a dead connection gives up, and the next poll runs on a fresh one.
const (
	minWatchRead = time.Second
	maxWatchRead = 5 * time.Second
)

// maxWatchEvery is the longest poll interval, whatever the watchers ask.
const maxWatchEvery = elector.MaxTTL

// WatchLease implements [elector.LeaseWatcher]. The channel receives the
// current lease of name the first time the Store reads it and whenever it
// changes, and the zero Lease whenever the Store hears of a release or
// reads the lease free; it holds the latest state only, is never closed,
// and sends never block. Call stop once done. An every of
// 0 or less means [elector.DefaultRetryInterval].
//
// One goroutine per Store follows every watched lease: it reads all of them
// in one statement, every `every` at most (the smallest any watcher asked
// for), each interval drawn at random between half of it and all of it so
// that polls keep no fixed phase against the holders' renewals. A release
// heard by the Store's listener (see [Store.WatchRelease]), or made through
// this Store, is delivered at once as the zero Lease; with
// [WithoutListener], a release in another process shows at the next poll.
// The goroutine starts with the first watcher and ends with the last, or at
// [Store.Close].
func (s *Store) WatchLease(name string, every time.Duration) (<-chan elector.Lease, func()) {
	if every <= 0 {
		every = elector.DefaultRetryInterval
	}
	every = max(every, elector.MinRetryInterval)
	sub := &leaseSub{ch: make(chan elector.Lease, 1), every: every}
	if s.closed.Load() {
		return sub.ch, func() {}
	}
	s.startListener()
	w := &s.leaseWatch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return sub.ch, func() {}
	}
	if w.names == nil {
		w.names = make(map[string]*watchedLease)
	}
	wl := w.names[name]
	if wl == nil {
		wl = &watchedLease{subs: make(map[*leaseSub]struct{})}
		w.names[name] = wl
	}
	wl.subs[sub] = struct{}{}
	w.subs++
	if w.cancel == nil {
		ctx, cancel := context.WithCancel(context.Background())
		w.cancel, w.every, w.kick = cancel, every, make(chan struct{}, 1)
		w.wg.Add(1)
		go s.watchLeases(ctx, w.kick)
	} else if every < w.every {
		w.every = every
		w.poke() // poll now, and from now on at the shorter interval
	}
	return sub.ch, sync.OnceFunc(func() { w.unwatch(name, sub) })
}

// leaseWatch is the state of a Store's lease watcher. Its zero value is
// ready; mu guards every field but wg.
type leaseWatch struct {
	mu     sync.Mutex
	names  map[string]*watchedLease
	subs   int                // watchers in names
	every  time.Duration      // the poll interval: the smallest every of the watchers
	cancel context.CancelFunc // stops the goroutine; nil when none runs
	kick   chan struct{}      // buffered 1: poll now
	closed bool               // set by Close: start nothing
	wg     sync.WaitGroup     // the goroutine, and one that is still ending
	reads  atomic.Int64       // batched reads so far, for tests
}

// watchedLease is a lease name and its watchers.
type watchedLease struct {
	subs map[*leaseSub]struct{}
	// releases counts the releases heard of this name, so that a poll that
	// read the lease before one of them does not deliver its older state.
	releases uint64
}

// leaseSub is one WatchLease call.
type leaseSub struct {
	ch    chan elector.Lease
	every time.Duration
	last  elector.Lease // what was delivered last
}

// deliver hands l to sub, replacing a state sub has not received yet,
// unless l is the held lease sub got last. The zero Lease (free) goes out
// every time: it tells no release from another, and between two of them
// the candidate may have found the lease taken by its own TryAcquire, a
// term this watcher never read. w.mu is held, which makes the send never
// block: all senders hold it, so the buffer is empty after the drain.
func (sub *leaseSub) deliver(l elector.Lease) {
	if l.Token != 0 && sub.last.Token == l.Token && sub.last.Version == l.Version {
		return
	}
	sub.last = l
	select {
	case <-sub.ch:
	default:
	}
	sub.ch <- l
}

// unwatch removes sub, and stops the goroutine with the last watcher.
func (w *leaseWatch) unwatch(name string, sub *leaseSub) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wl := w.names[name]
	if wl == nil {
		return
	}
	if _, ok := wl.subs[sub]; !ok {
		return
	}
	delete(wl.subs, sub)
	w.subs--
	if len(wl.subs) == 0 {
		delete(w.names, name)
	}
	if w.subs == 0 && w.cancel != nil {
		w.cancel()
		w.cancel = nil
	}
}

// released delivers the zero Lease at once to the watchers of name, which
// was just released.
func (w *leaseWatch) released(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wl := w.names[name]
	if wl == nil {
		return
	}
	wl.releases++
	for sub := range wl.subs {
		sub.deliver(elector.Lease{})
	}
}

// poke makes the goroutine poll now, without blocking. w.mu is held.
func (w *leaseWatch) poke() {
	if w.cancel == nil {
		return
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// pokeLocked is poke for callers that do not hold w.mu.
func (w *leaseWatch) pokeLocked() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.poke()
}

// close stops the goroutine and waits for it; nothing starts afterwards.
func (w *leaseWatch) close() {
	w.mu.Lock()
	w.closed = true
	if w.cancel != nil {
		w.cancel()
		w.cancel = nil
	}
	w.mu.Unlock()
	w.wg.Wait()
}

// watchLeases is the lease watcher's goroutine: it polls every watched
// lease until ctx ends, and at once when kicked.
func (s *Store) watchLeases(ctx context.Context, kick <-chan struct{}) {
	w := &s.leaseWatch
	defer w.wg.Done()
	var (
		names  []string
		counts []uint64
		failed bool // the last poll failed: log only the first of a run
	)
	w.mu.Lock()
	every := w.every
	w.mu.Unlock()
	timer := time.NewTimer(jitter(every))
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
		w.mu.Lock()
		every = maxWatchEvery
		for name, wl := range w.names {
			names = append(names, name)
			counts = append(counts, wl.releases)
			for sub := range wl.subs {
				every = min(every, sub.every)
			}
		}
		w.every = every
		w.mu.Unlock()

		start := time.Now()
		w.reads.Add(1)
		found, err := s.readLeases(ctx, names, min(max(every, minWatchRead), maxWatchRead))
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failed:
			s.opts.logger.Warn("pglease: lease watcher could not read the watched leases; retrying",
				"table", s.table, "leases", len(names), "err", withoutSecrets(err, s.secrets...))
		case err == nil && failed:
			s.opts.logger.Info("pglease: lease watcher reads again", "table", s.table)
		}
		failed = err != nil
		if err == nil {
			w.mu.Lock()
			if ctx.Err() == nil { // no delivery after the last watcher left
				for i, name := range names {
					wl := w.names[name]
					if wl == nil || wl.releases != counts[i] {
						continue // unwatched, or released since the read began
					}
					l := found[name] // zero if absent or released
					for sub := range wl.subs {
						sub.deliver(l)
					}
				}
			}
			w.mu.Unlock()
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

// readLeases reads the unreleased leases among names, in one
// statement on the lease pool, bounded by limit; a read that failed for want
// of a connection is tried once more.
func (s *Store) readLeases(ctx context.Context, names []string, limit time.Duration) (map[string]elector.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	found, err := s.queryLeases(ctx, names)
	if s.retry(ctx, err, true) {
		found, err = s.queryLeases(ctx, names)
	}
	return found, err
}

func (s *Store) queryLeases(ctx context.Context, names []string) (map[string]elector.Lease, error) {
	rows, err := s.leases.Query(ctx, s.stmts.Watch, names)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	found := make(map[string]elector.Lease, len(names))
	for rows.Next() {
		var (
			l                     elector.Lease
			token, version, ttlUS int64
		)
		if err := rows.Scan(&l.Name, &l.Holder, &token, &version, &ttlUS, &l.Written); err != nil {
			return nil, err
		}
		l.Token, l.Version, l.TTL = uint64(token), uint64(version), fromMicros(ttlUS)
		found[l.Name] = l
	}
	return found, rows.Err()
}

// jitter returns a duration in [d/2, d].
func jitter(d time.Duration) time.Duration {
	half := d / 2
	return half + rand.N(d-half+1)
}
