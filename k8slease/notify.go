package k8slease

import (
	"context"
	"errors"
	"fmt"
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
	return s.changes.Notify(changed)
}

// namespaceWatch is the state of the Store's watch of its namespace.
type namespaceWatch struct {
	send func(elector.Change)
	rv   string // the resourceVersion to resume at; "" to start anew
}

// watch runs the watch of the namespace until ctx ends, starting it again
// with backoff after it failed.
func (s *Store) watch(ctx context.Context, send func(elector.Change)) {
	w := &namespaceWatch{send: send}
	watchOnce := func(ctx context.Context) (bool, error) { return s.watchOnce(ctx, w) }
	backoff.Retry(ctx, watchBackoffMin, watchBackoffMax, watchOnce, func(err error, wait time.Duration) {
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
		w.send(elector.Change{})
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
			w.send(s.change(name, ev.Type, obj))
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
