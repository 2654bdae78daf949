package k8slease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/backoff"
)

// The watch of the namespace starts again after it failed, after a wait
// that doubles from watchBackoffMin to watchBackoffMax; the API server ends
// each watch after watchSeconds, and the client gives up on one that has
// said nothing (not even a bookmark) for twice that.
const (
	watchBackoffMin = 50 * time.Millisecond
	watchBackoffMax = 5 * time.Second
	watchSeconds    = 300
	listPage        = 500
)

// WatchLease implements [elector.LeaseWatcher] on the Store's one watch of
// the Leases of its namespace: the channel receives the current lease of
// name (the zero Lease when it is free: released, deleted or never
// written) as soon as the watch has listed the namespace, at once if it
// already has, and then with every write to the Lease, renewals included.
// It holds the latest state only, never an older state than it delivered,
// is never closed, and sends never block; after [Store.Close] it receives
// nothing. Call stop once done. every is not used: the watch delivers
// every write.
//
// The first WatchLease starts the watch, one goroutine that [Store.Close]
// stops. It lists the namespace, then watches from the list's
// resourceVersion, resuming after the API server ends a watch; after a
// watch error, including 410 Gone (a compacted resourceVersion), it lists
// again, after a backoff of up to 5s when the error repeats.
func (s *Store) WatchLease(name string, every time.Duration) (<-chan elector.Lease, func()) {
	sub := &leaseSub{name: name, ch: make(chan elector.Lease, 1)}
	obj, err := ObjectName(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || s.closed {
		return sub.ch, func() {} // TryAcquire reports the bad name
	}
	if s.watch == nil {
		s.watch = s.startWatch()
	}
	w := s.watch
	if w.subs[obj] == nil {
		w.subs[obj] = make(map[*leaseSub]struct{})
	}
	w.subs[obj][sub] = struct{}{}
	if w.listed {
		s.offer(obj, sub)
	}
	return sub.ch, sync.OnceFunc(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(w.subs[obj], sub)
		if len(w.subs[obj]) == 0 {
			delete(w.subs, obj)
		}
	})
}

// leaseWatch is the Store's one watch of its namespace. The Store's mu
// guards its maps and listed.
type leaseWatch struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns

	subs   map[string]map[*leaseSub]struct{} // by object name
	leases map[string]watched                // every Lease of the namespace, by object name
	listed bool                              // leases is the result of a list
}

// watched is the watch's copy of one Lease.
type watched struct {
	version uint64 // resourceVersion of the state, or the deletion's
	rec     record
	ok      bool // rec was decoded; a Lease that does not decode is not delivered
	deleted bool
}

// leaseSub is one WatchLease call.
type leaseSub struct {
	name string
	ch   chan elector.Lease
	last uint64 // the version delivered last; 0 before the first
}

// startWatch starts the watch; s.mu is held.
func (s *Store) startWatch() *leaseWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &leaseWatch{cancel: cancel, done: make(chan struct{}),
		subs: make(map[string]map[*leaseSub]struct{}), leases: make(map[string]watched)}
	go s.runWatch(ctx, w)
	return w
}

// stop stops the watch and waits for its goroutine.
func (w *leaseWatch) stop() {
	w.cancel()
	<-w.done
}

// offer hands sub the state of the Lease obj unless it delivered that state
// or a newer one. s.mu is held, and every sender holds it, so the send never
// blocks: the buffer is empty after the drain.
func (s *Store) offer(obj string, sub *leaseSub) {
	cur, found := s.watch.leases[obj]
	switch {
	case s.closed, found && !cur.ok, found && cur.version <= sub.last, !found && sub.last != 0:
		return
	}
	var l elector.Lease
	if found {
		s.high[obj] = max(s.high[obj], cur.rec.token)
		l = cur.rec.lease(sub.name, s.high[obj])
	}
	sub.last = max(cur.version, 1)
	select {
	case <-sub.ch:
	default:
	}
	sub.ch <- l
}

// set records the state of the Lease obj and hands it to its subscribers.
// s.mu is held.
func (s *Store) set(obj string, st watched) {
	w := s.watch
	if old, ok := w.leases[obj]; ok && old.version >= st.version {
		return
	}
	w.leases[obj] = st
	for sub := range w.subs[obj] {
		s.offer(obj, sub)
	}
	if st.deleted && len(w.subs[obj]) == 0 {
		delete(w.leases, obj) // the copy keeps the Leases that exist, and the watched ones
	}
}

// runWatch lists and watches the namespace until ctx ends.
func (s *Store) runWatch(ctx context.Context, w *leaseWatch) {
	defer close(w.done)
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, subs := range w.subs {
			for sub := range subs {
				select {
				case <-sub.ch: // nothing is received after Close
				default:
				}
			}
		}
	}()
	backoff.Retry(ctx, watchBackoffMin, watchBackoffMax, s.listAndWatch, func(err error, wait time.Duration) {
		s.log.Warn("k8slease: lease watch failed; listing the namespace again",
			"namespace", s.namespace, "retry_in", wait, "err", err)
	})
}

// listAndWatch lists the namespace and watches it from there until a watch
// fails. ran reports whether the list succeeded.
func (s *Store) listAndWatch(ctx context.Context) (ran bool, err error) {
	rv, err := s.list(ctx)
	if err != nil {
		return false, err
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, 2*watchSeconds*time.Second)
		rv, err = s.watchFrom(wctx, rv)
		cancel()
		if err != nil {
			return true, err
		}
	}
}

// list reads every Lease of the namespace, page by page at one
// resourceVersion, makes the copy that (Leases it did not find are free as
// of the list) and returns the list's resourceVersion.
func (s *Store) list(ctx context.Context) (string, error) {
	var items []coordinationv1.Lease
	opts := metav1.ListOptions{Limit: listPage}
	var rv string
	for {
		lctx, cancel := context.WithTimeout(ctx, s.opTimeout)
		page, err := s.leases.List(lctx, opts)
		cancel()
		if err != nil {
			return "", fmt.Errorf("list the Leases of namespace %q: %w", s.namespace, err)
		}
		if rv == "" {
			rv = page.ResourceVersion
		}
		items = append(items, page.Items...)
		if page.Continue == "" {
			break
		}
		opts.Continue = page.Continue
	}
	asOf, err := parseVersion("(list)", rv)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.watch
	found := make(map[string]bool, len(items))
	for i := range items {
		found[items[i].Name] = true
		s.set(items[i].Name, s.watchedState(&items[i]))
	}
	for obj, st := range w.leases {
		if !found[obj] && !st.deleted && st.version < asOf {
			s.set(obj, watched{version: asOf, ok: true, deleted: true}) // as of the list
		}
	}
	w.listed = true
	for obj, subs := range w.subs {
		if _, ok := w.leases[obj]; !ok {
			for sub := range subs {
				s.offer(obj, sub) // free: never written
			}
		}
	}
	return rv, nil
}

// watchedState is the watch's copy of obj. s.mu is held.
func (s *Store) watchedState(obj *coordinationv1.Lease) watched {
	rec, err := decode(obj)
	if err != nil {
		v, _ := parseVersion(obj.Name, obj.ResourceVersion)
		return watched{version: v}
	}
	return watched{version: rec.version, rec: rec, ok: true}
}

// watchFrom watches the namespace from resourceVersion rv until the API
// server ends the watch (it returns the last resourceVersion seen) or the
// watch fails.
func (s *Store) watchFrom(ctx context.Context, rv string) (string, error) {
	wi, err := s.leases.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true, TimeoutSeconds: ptr.To[int64](watchSeconds)})
	if err != nil {
		return rv, fmt.Errorf("watch the Leases of namespace %q: %w", s.namespace, err)
	}
	defer wi.Stop()
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return rv, ctx.Err()
		case ev, ok = <-wi.ResultChan():
		}
		if !ok {
			return rv, nil
		}
		if ev.Type == watch.Error {
			err := apierrors.FromObject(ev.Object)
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return rv, fmt.Errorf("resourceVersion %s was compacted (410 Gone): %w", rv, err)
			}
			return rv, err
		}
		obj, isLease := ev.Object.(*coordinationv1.Lease)
		if !isLease {
			return rv, errors.New("the watch sent an event that is not a Lease")
		}
		rv = obj.ResourceVersion
		s.mu.Lock()
		switch ev.Type {
		case watch.Added, watch.Modified:
			s.set(obj.Name, s.watchedState(obj))
		case watch.Deleted:
			v, _ := parseVersion(obj.Name, obj.ResourceVersion)
			s.set(obj.Name, watched{version: v, ok: true, deleted: true})
		}
		s.mu.Unlock()
	}
}
