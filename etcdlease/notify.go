package etcdlease

import (
	"context"
	"errors"
	"strings"
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
// the prefix, and a read of everything ("" Name) when the watch starts
// anew, as it may have missed writes meanwhile.
func (s *Store) Notify(changed func(elector.Change)) (stop func()) {
	return s.changes.Notify(changed)
}

// prefixWatch is the state of the Store's watch of its prefix.
type prefixWatch struct {
	watcher clientv3.Watcher
	send    func(elector.Change)
	rev     int64 // the revision of the last event sent; 0 to start anew
}

// watch runs the watch of the prefix until ctx ends, starting it again
// with backoff after it failed.
func (s *Store) watch(ctx context.Context, send func(elector.Change)) {
	w := &prefixWatch{watcher: clientv3.NewWatcher(s.client), send: send}
	defer w.watcher.Close()
	watchOnce := func(ctx context.Context) (bool, error) { return s.watchOnce(ctx, w) }
	backoff.Retry(ctx, watchBackoffMin, watchBackoffMax, watchOnce, func(err error, wait time.Duration) {
		s.log.Warn("etcdlease: watch failed; starting it again",
			"prefix", s.prefix, "retry_in", wait, "err", err)
	})
}

// watchOnce runs one etcd watch on the prefix until it fails or ctx ends.
// It resumes after the last event sent, or, the first time and after
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
		if resp.Created {
			ran = true
			if w.rev == 0 {
				w.send(elector.Change{})
			}
		}
		for _, ev := range resp.Events {
			w.rev = ev.Kv.ModRevision
			w.send(s.change(ev))
		}
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
