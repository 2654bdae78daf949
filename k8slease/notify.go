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
)

// Notify implements [elector.Notifier] with one watch of the Leases of the
// namespace per Store, which runs while any Notify is not stopped and until
// [Store.Close]: changed gets the new state of every Lease written, and a
// read of everything ("" Name) when the watch starts anew, as it may have
// missed writes meanwhile.
func (s *Store) Notify(changed func(elector.Change)) (stop func()) {
	sub := &subscriber{changed: changed}
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	if s.isClosed() {
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
		s.notifyMu.Lock()
		delete(s.subs, sub)
		w := s.watch
		if len(s.subs) > 0 || w == nil {
			s.notifyMu.Unlock()
			return
		}
		s.watch = nil
		w.cancel() // under notifyMu: no delivery after this
		s.notifyMu.Unlock()
		<-w.done
	})
}

// subscriber is one Notify call.
type subscriber struct{ changed func(elector.Change) }

// namespaceWatch is the Store's one watch of its namespace.
type namespaceWatch struct {
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns
	rv     string        // the resourceVersion to resume at; "" to start anew
}

// startWatch starts the watch; s.notifyMu is held.
func (s *Store) startWatch() *namespaceWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &namespaceWatch{ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go s.runWatch(w)
	return w
}

func (s *Store) runWatch(w *namespaceWatch) {
	defer close(w.done)
	watchOnce := func(ctx context.Context) (bool, error) { return s.watchOnce(ctx, w) }
	backoff.Retry(w.ctx, watchBackoffMin, watchBackoffMax, watchOnce, func(err error, wait time.Duration) {
		s.log.Warn("k8slease: lease watch failed; starting it again",
			"namespace", s.namespace, "retry_in", wait, "err", err)
	})
}

// watchOnce watches the namespace from w.rv, resuming after the API server
// ends a watch, until a watch fails. To start anew (the first time, and
// after 410 Gone: a compacted resourceVersion) it reads the current
// resourceVersion with a List of one Lease and asks for a read of every
// lease. ran reports whether a watch was established.
func (s *Store) watchOnce(ctx context.Context, w *namespaceWatch) (ran bool, err error) {
	if w.rv == "" {
		lctx, cancel := context.WithTimeout(ctx, s.opTimeout)
		page, err := s.leases.List(lctx, metav1.ListOptions{Limit: 1})
		cancel()
		if err != nil {
			return false, fmt.Errorf("list the Leases of namespace %q: %w", s.namespace, err)
		}
		w.rv = page.ResourceVersion
		s.deliver(w, elector.Change{})
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, 2*watchSeconds*time.Second)
		established, err := s.watchFrom(wctx, w)
		cancel()
		ran = ran || established
		if err != nil {
			return ran, err
		}
	}
}

// watchFrom watches the namespace from w.rv, keeping w.rv the last
// resourceVersion seen, until the API server ends the watch or it fails.
func (s *Store) watchFrom(ctx context.Context, w *namespaceWatch) (established bool, err error) {
	wi, err := s.leases.Watch(ctx, metav1.ListOptions{ResourceVersion: w.rv, AllowWatchBookmarks: true, TimeoutSeconds: ptr.To[int64](watchSeconds)})
	if err != nil {
		return false, s.watchErr(w, err)
	}
	defer wi.Stop()
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case ev, ok = <-wi.ResultChan():
		}
		switch {
		case !ok:
			return true, nil
		case ev.Type == watch.Error:
			return true, s.watchErr(w, apierrors.FromObject(ev.Object))
		}
		obj, isLease := ev.Object.(*coordinationv1.Lease)
		if !isLease {
			return true, errors.New("the watch sent an event that is not a Lease")
		}
		w.rv = obj.ResourceVersion
		if name, err := LeaseName(obj.Name); err == nil && ev.Type != watch.Bookmark {
			s.deliver(w, s.change(name, ev.Type, obj))
		}
	}
}

// watchErr wraps the error of a watch from w.rv, after which the watch
// starts anew if the API server no longer has w.rv (410 Gone).
func (s *Store) watchErr(w *namespaceWatch, err error) error {
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		err = fmt.Errorf("resourceVersion %s was compacted (410 Gone): %w", w.rv, err)
		w.rv = ""
	}
	return fmt.Errorf("watch the Leases of namespace %q: %w", s.namespace, err)
}

// change is what an event of type t tells of the lease name in obj.
func (s *Store) change(name string, t watch.EventType, obj *coordinationv1.Lease) elector.Change {
	c := elector.Change{Name: name, State: elector.Lease{Name: name}, Known: true}
	if t == watch.Deleted {
		return c
	}
	rec, err := s.decode(obj)
	switch {
	case err != nil:
		return elector.Change{Name: name} // a read reports it
	case rec.holder != "":
		c.State = s.lease(name, rec)
	}
	return c
}

// deliver hands c to every subscriber unless w was stopped. It holds
// s.notifyMu, as stop does, so that nothing is delivered after stop
// returns.
func (s *Store) deliver(w *namespaceWatch, c elector.Change) {
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	if w.ctx.Err() != nil {
		return
	}
	for sub := range s.subs {
		sub.changed(c)
	}
}
