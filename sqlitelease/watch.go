package sqlitelease

import (
	"context"
	"database/sql"
	"encoding/json"
	"sync"
	"time"
)

// WatchRelease implements [elector.ReleaseWatcher]. The returned channel
// receives a value soon after the lease name may have become free: at once
// when it is released through this Store, and within about one watch
// interval (see [WithWatchInterval]) when another process, or another Store
// on the same file, changes the file and the lease is then free (released,
// or never acquired). Spurious
// values are possible; the channel is never closed. The caller must call
// stop when it no longer watches.
//
// On Linux the channel also receives soon after the holder of the lease
// died or closed its Store, once a candidate's TryAcquire through this Store
// found the lease held by it (see the package documentation).
//
// While anyone watches, one goroutine per Store polls PRAGMA data_version on
// a connection of its own, and one goroutine per holder that watched leases
// wait for tests that holder's liveness lock; they stop when the last
// watcher stops, or at [Store.Close]. After Close the channel never
// receives.
func (s *Store) WatchRelease(name string) (released <-chan struct{}, stop func()) {
	return s.watch.add(name)
}

// watchState holds the release watchers of a Store, its poller and its
// holder watches.
type watchState struct {
	db       *sql.DB
	interval time.Duration
	live     *sidecar // nil without liveness locks; set by Open

	// lifeMu serializes starting and stopping the goroutines; they never
	// take it, so stopping may wait for them while holding it.
	lifeMu sync.Mutex
	poller *poller              // guarded by lifeMu; nil while nobody watches
	lives  map[holderID]*poller // guarded by lifeMu: one goroutine per holder waited for

	mu       sync.Mutex // guards watchers, count, closed and holderOf
	watchers map[string]map[*watcher]struct{}
	count    int
	closed   bool
	// holderOf maps a watched lease name to the holder its candidates
	// wait for, as this Store's last TryAcquire of it found.
	holderOf map[string]holderID
}

type watcher struct{ ch chan struct{} }

func (w *watchState) init(db *sql.DB, interval time.Duration) {
	w.db, w.interval = db, interval
	w.watchers = make(map[string]map[*watcher]struct{})
	w.lives = make(map[holderID]*poller)
	w.holderOf = make(map[string]holderID)
}

func (w *watchState) add(name string) (<-chan struct{}, func()) {
	wt := &watcher{ch: make(chan struct{}, 1)}
	w.lifeMu.Lock()
	defer w.lifeMu.Unlock()
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return wt.ch, func() {}
	}
	set := w.watchers[name]
	if set == nil {
		set = make(map[*watcher]struct{})
		w.watchers[name] = set
	}
	set[wt] = struct{}{}
	w.count++
	w.mu.Unlock()
	if w.poller == nil {
		w.poller = startPoller(w)
	}
	var once sync.Once
	return wt.ch, func() { once.Do(func() { w.remove(name, wt) }) }
}

func (w *watchState) remove(name string, wt *watcher) {
	w.lifeMu.Lock()
	defer w.lifeMu.Unlock()
	w.mu.Lock()
	if set, ok := w.watchers[name]; ok {
		if _, ok := set[wt]; ok {
			delete(set, wt)
			w.count--
			if len(set) == 0 {
				delete(w.watchers, name)
			}
		}
	}
	_, waited := w.holderOf[name]
	forget := waited && w.watchers[name] == nil // nobody waits for its holder anymore
	if forget {
		delete(w.holderOf, name)
	}
	idle := w.count == 0
	w.mu.Unlock()
	if idle && w.poller != nil {
		w.poller.stop()
		w.poller = nil
	}
	if forget {
		w.syncLives()
	}
}

// close stops the goroutines and keeps them from starting again.
func (w *watchState) close() {
	w.lifeMu.Lock()
	defer w.lifeMu.Unlock()
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	if w.poller != nil {
		w.poller.stop()
		w.poller = nil
	}
	w.syncLives()
}

// notify wakes the watchers of the named lease without blocking.
func (w *watchState) notify(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.notifyLocked(name)
}

// notifyLocked is notify for a caller that holds mu.
func (w *watchState) notifyLocked(name string) {
	for wt := range w.watchers[name] {
		select {
		case wt.ch <- struct{}{}:
		default:
		}
	}
}

// names returns the watched lease names.
func (w *watchState) names() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := make([]string, 0, len(w.watchers))
	for name := range w.watchers {
		names = append(names, name)
	}
	return names
}

// poller is one of the store's watching goroutines.
type poller struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// finished reports whether the goroutine has returned.
func (p *poller) finished() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func startPoller(w *watchState) *poller {
	ctx, cancel := context.WithCancel(context.Background())
	p := &poller{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		w.poll(ctx)
	}()
	return p
}

// stop stops the goroutine and waits for it.
func (p *poller) stop() {
	p.cancel()
	<-p.done
}

// freeSQL returns which of the lease names in the JSON array ?1 have no
// unreleased term.
const freeSQL = `SELECT j.value FROM json_each(?1) AS j
WHERE NOT EXISTS (SELECT 1 FROM ` + leaseTable + ` AS l WHERE l.name = j.value AND NOT l.released)`

// poll checks PRAGMA data_version every interval until ctx ends. The value
// changes whenever another connection committed a change to the file; then
// poll wakes the watchers of every watched lease that is now free. Lease
// renewals and job writes change the file too, but wake nobody while the
// lease stays held. Errors are ignored: the elector's own polling remains
// the correctness path.
func (w *watchState) poll(ctx context.Context) {
	ticker := time.NewTicker(w.interval)
	defer ticker.Stop()
	var conn *sql.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	last := int64(-1) // no reading yet
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if conn == nil {
			c, err := w.db.Conn(ctx)
			if err != nil {
				continue
			}
			conn, last = c, -1
		}
		var version int64
		if err := conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&version); err != nil {
			_ = conn.Close()
			conn = nil
			continue
		}
		if version == last {
			continue
		}
		// The first reading wakes the watchers of free leases too: a release
		// may have come between a candidate's last attempt and this reading.
		last = version
		w.wakeFree(ctx, conn)
	}
}

// wakeFree wakes the watchers of the watched leases that are free.
func (w *watchState) wakeFree(ctx context.Context, conn *sql.Conn) {
	names := w.names()
	if len(names) == 0 {
		return
	}
	list, err := json.Marshal(names)
	if err != nil {
		return
	}
	rows, err := conn.QueryContext(ctx, freeSQL, string(list))
	if err != nil {
		return
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if rows.Scan(&name) == nil {
			w.notify(name)
		}
	}
}
