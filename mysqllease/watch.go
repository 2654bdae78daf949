package mysqllease

import (
	"context"
	"strings"
	"sync"
	"time"
)

// WatchRelease implements [elector.ReleaseWatcher]. The returned channel
// receives a value soon after the lease name is released: at once when it
// is released through this Store, and within about one poll interval
// ([WithPollInterval]) when another Store or process releases it (or
// deletes its row). Spurious values are possible; the channel is never
// closed. The caller must call stop when it no longer watches.
//
// The first WatchRelease starts the Store's one poller goroutine, which
// [Store.Close] stops and waits for. Each interval, while anyone watches, it
// runs one primary-key SELECT of the watched names' token, version and
// released flag on a lease connection (one per 500 names): 1/interval
// queries per second per Store (4 at the default 250ms), whatever the
// number of watchers, and none while nobody watches. It wakes the watchers of a name whose lease
// it finds free and did not find free, in that same state, at its last
// reading. After Close the channel never receives.
func (s *Store) WatchRelease(name string) (released <-chan struct{}, stop func()) {
	return s.watch.add(name)
}

// watcher holds the release watchers of a Store and its poller.
type watcher struct {
	s *Store

	mu      sync.Mutex
	byName  map[string]map[chan struct{}]struct{}
	started bool
	closed  bool
	cancel  context.CancelFunc
	done    chan struct{}
}

func (w *watcher) init(s *Store) {
	w.s = s
	w.byName = make(map[string]map[chan struct{}]struct{})
}

func (w *watcher) add(name string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ch, func() {}
	}
	set := w.byName[name]
	if set == nil {
		set = make(map[chan struct{}]struct{})
		w.byName[name] = set
	}
	set[ch] = struct{}{}
	if !w.started {
		w.started = true
		ctx, cancel := context.WithCancel(context.Background())
		w.cancel, w.done = cancel, make(chan struct{})
		go func() {
			defer close(w.done)
			w.poll(ctx)
		}()
	}
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			delete(set, ch)
			if len(w.byName[name]) == 0 {
				delete(w.byName, name)
			}
		})
	}
}

// close stops the poller and waits for it.
func (w *watcher) close() {
	w.mu.Lock()
	w.closed = true
	started := w.started
	w.byName = map[string]map[chan struct{}]struct{}{}
	w.mu.Unlock()
	if started {
		w.cancel()
		<-w.done
	}
}

// notify wakes the watchers of name without blocking.
func (w *watcher) notify(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.byName[name] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (w *watcher) names() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := make([]string, 0, len(w.byName))
	for name := range w.byName {
		names = append(names, name)
	}
	return names
}

// leaseState is what the poller reads of a watched lease.
type leaseState struct {
	token, version uint64
	free           bool // released, or no row
}

// pollChunk bounds the names in one poll query.
const pollChunk = 500

// poll reads the watched leases every interval until ctx ends. Errors are
// ignored: the elector's own polling remains the correctness path.
func (w *watcher) poll(ctx context.Context) {
	interval := w.s.opts.poll
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	last := make(map[string]leaseState)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		names := w.names()
		if len(names) == 0 {
			clear(last)
			continue
		}
		now, err := w.read(ctx, names, max(interval, time.Second))
		if err != nil {
			continue
		}
		watched := make(map[string]bool, len(names))
		for _, name := range names {
			watched[name] = true
		}
		for name := range last {
			if !watched[name] {
				delete(last, name)
			}
		}
		for _, name := range names {
			st, ok := now[name]
			if !ok {
				st = leaseState{free: true}
			}
			if prev, seen := last[name]; st.free && (!seen || prev != st) {
				w.notify(name)
			}
			last[name] = st
		}
	}
}

// read returns the state of the rows of names, within timeout.
func (w *watcher) read(ctx context.Context, names []string, timeout time.Duration) (map[string]leaseState, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	states := make(map[string]leaseState, len(names))
	for start := 0; start < len(names); start += pollChunk {
		chunk := names[start:min(start+pollChunk, len(names))]
		args := make([]any, len(chunk))
		for i, n := range chunk {
			args[i] = n
		}
		query := `SELECT name, token, version, released FROM ` + w.s.table +
			` WHERE name IN (?` + strings.Repeat(", ?", len(chunk)-1) + `)`
		err := w.s.leases.do(ctx, func(q querier) error {
			rows, err := q.QueryContext(ctx, query, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var name string
				var st leaseState
				if err := rows.Scan(&name, &st.token, &st.version, &st.free); err != nil {
					return err
				}
				states[name] = st
			}
			return rows.Err()
		})
		if err != nil {
			return nil, err
		}
	}
	return states, nil
}
