package etcdlease

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The release watch starts again after it failed, after a wait that doubles
// from watchBackoffMin to watchBackoffMax.
const (
	watchBackoffMin = 50 * time.Millisecond
	watchBackoffMax = 5 * time.Second
)

// WatchRelease implements [elector.ReleaseWatcher]. The channel receives a
// value soon after the named lease is released through any Store on the
// same prefix, or its key is deleted; spurious values are allowed (every
// watcher is woken when the watch starts or starts again, since it may have
// missed a release meanwhile). The channel is never closed and sends never
// block. Call stop once done.
//
// The first WatchRelease starts the Store's release watch: one goroutine
// and one etcd watch on the whole prefix, on a watcher of its own, which
// [Store.Close] stops. The watch requires a leader: if the member it runs
// on loses its leader, the watch ends and starts again. Until it runs, only releases through this Store wake its
// watchers; callers such as [elector.LeaseElector] poll regardless, so the
// watch only makes handoff faster.
func (s *Store) WatchRelease(name string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	set := s.watchers[name]
	if set == nil {
		set = make(map[chan struct{}]struct{})
		s.watchers[name] = set
	}
	set[ch] = struct{}{}
	if s.watch == nil && !s.closed.Load() {
		s.watch = s.startWatch()
	}
	s.mu.Unlock()
	return ch, sync.OnceFunc(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(set, ch)
		if len(s.watchers[name]) == 0 {
			delete(s.watchers, name)
		}
	})
}

// poke wakes the watchers of name without blocking.
func (s *Store) poke(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.watchers[name] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// pokeAll wakes every watcher without blocking.
func (s *Store) pokeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, set := range s.watchers {
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// releaseWatch is the one goroutine of a Store that watches its prefix.
type releaseWatch struct {
	watcher clientv3.Watcher
	cancel  context.CancelFunc
	done    chan struct{} // closed when run returns
	started atomic.Int64  // watches created so far, counted after their poke
}

// startWatch starts the release watch; s.mu is held.
func (s *Store) startWatch() *releaseWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &releaseWatch{watcher: clientv3.NewWatcher(s.client), cancel: cancel, done: make(chan struct{})}
	go s.runWatch(ctx, w)
	return w
}

// stop stops the watch and waits for its goroutine and watcher to finish.
func (w *releaseWatch) stop() {
	w.cancel()
	<-w.done
	_ = w.watcher.Close()
}

func (s *Store) runWatch(ctx context.Context, w *releaseWatch) {
	defer close(w.done)
	backoff := watchBackoffMin
	for {
		created, err := s.watchOnce(ctx, w)
		if ctx.Err() != nil {
			return
		}
		if created {
			backoff = watchBackoffMin
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		s.log.Warn("etcdlease: release watch failed; starting it again",
			"prefix", s.prefix, "retry_in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, watchBackoffMax)
	}
}

// watchOnce runs one etcd watch on the prefix until it fails or ctx ends.
// created reports whether etcd created the watch.
func (s *Store) watchOnce(ctx context.Context, w *releaseWatch) (created bool, err error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := w.watcher.Watch(wctx, s.prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	for resp := range wch {
		if err := resp.Err(); err != nil {
			return created, err
		}
		if resp.Created {
			created = true
			s.pokeAll() // a release may have happened before the watch began
			w.started.Add(1)
			continue
		}
		for _, ev := range resp.Events {
			if ev.Type == mvccpb.DELETE || isReleased(ev.Kv.Value) {
				s.poke(strings.TrimPrefix(string(ev.Kv.Key), s.prefix))
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return created, err
	}
	return created, errors.New("the watch ended")
}

// isReleased reports whether a lease value is released.
func isReleased(v []byte) bool { return bytes.HasPrefix(v, []byte(releasedPrefix)) }
