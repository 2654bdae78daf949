package etcdlease

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/backoff"
)

// The watch starts again after it failed, after a wait that doubles
// from watchBackoffMin to watchBackoffMax.
const (
	watchBackoffMin = 50 * time.Millisecond
	watchBackoffMax = 5 * time.Second
)

// Notify implements [elector.Notifier] with one etcd watch of the prefix
// per Store, which runs while any Notify is not stopped and until
// [Store.Close]: changed gets the new state of every lease written under
// the prefix, and a read of everything ("" Name) when the watch starts,
// as it may have missed writes meanwhile.
func (s *Store) Notify(changed func(elector.Change)) (stop func()) {
	sub := &subscriber{changed: changed}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return func() {}
	}
	if s.subs == nil {
		s.subs = make(map[*subscriber]struct{})
	}
	s.subs[sub] = struct{}{}
	if s.watch == nil {
		s.watch = s.startWatch()
	}
	return sync.OnceFunc(func() {
		s.mu.Lock()
		delete(s.subs, sub)
		w := s.watch
		if len(s.subs) > 0 || w == nil {
			s.mu.Unlock()
			return
		}
		s.watch = nil
		w.cancel() // under s.mu: no delivery after this
		s.mu.Unlock()
		w.wait()
	})
}

// subscriber is one Notify call.
type subscriber struct{ changed func(elector.Change) }

// prefixWatch is the Store's one watch of its prefix.
type prefixWatch struct {
	watcher clientv3.Watcher
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{} // closed when run returns
	rev     int64         // the revision of the last event delivered; 0 to start anew
}

// startWatch starts the watch; s.mu is held.
func (s *Store) startWatch() *prefixWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &prefixWatch{watcher: clientv3.NewWatcher(s.client), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go s.runWatch(w)
	return w
}

// wait waits for the cancelled watch's goroutine and closes its watcher.
func (w *prefixWatch) wait() {
	<-w.done
	_ = w.watcher.Close()
}

func (s *Store) runWatch(w *prefixWatch) {
	defer close(w.done)
	watchOnce := func(ctx context.Context) (bool, error) { return s.watchOnce(ctx, w) }
	backoff.Retry(w.ctx, watchBackoffMin, watchBackoffMax, watchOnce, func(err error, wait time.Duration) {
		s.log.Warn("etcdlease: watch failed; starting it again",
			"prefix", s.prefix, "retry_in", wait, "err", err)
	})
}

// watchOnce runs one etcd watch on the prefix until it fails or ctx ends.
// It resumes after the last event delivered, or, the first time and after
// a compaction took that revision, starts at the current revision and asks
// for a read of every lease. ran reports whether etcd created the watch.
func (s *Store) watchOnce(ctx context.Context, w *prefixWatch) (ran bool, err error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCreatedNotify()}
	if w.rev != 0 {
		opts = append(opts, clientv3.WithRev(w.rev+1))
	}
	for resp := range w.watcher.Watch(wctx, s.prefix, opts...) {
		if resp.CompactRevision != 0 {
			w.rev = 0
		}
		if err := resp.Err(); err != nil {
			return ran, err
		}
		changes := make([]elector.Change, 0, len(resp.Events))
		if resp.Created {
			ran = true
			if w.rev == 0 {
				changes = append(changes, elector.Change{})
			}
		}
		for _, ev := range resp.Events {
			w.rev = ev.Kv.ModRevision
			changes = append(changes, s.change(ev))
		}
		s.deliver(w, changes)
	}
	if err := ctx.Err(); err != nil {
		return ran, err
	}
	return ran, errors.New("the watch ended")
}

// change is what the event ev tells of its lease.
func (s *Store) change(ev *clientv3.Event) elector.Change {
	name := strings.TrimPrefix(string(ev.Kv.Key), s.prefix)
	c := elector.Change{Name: name, State: elector.Lease{Name: name}, Known: true}
	if ev.Type == mvccpb.PUT {
		l, released, err := decodeLease(name, ev.Kv)
		switch {
		case err != nil:
			return elector.Change{Name: name} // a read reports it
		case !released:
			c.State = l
		}
	}
	return c
}

// deliver hands changes to every subscriber unless w was stopped. It holds
// s.mu, as stop does, so that nothing is delivered after stop returns.
func (s *Store) deliver(w *prefixWatch, changes []elector.Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.ctx.Err() != nil {
		return
	}
	for sub := range s.subs {
		for _, c := range changes {
			sub.changed(c)
		}
	}
}
