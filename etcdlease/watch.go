package etcdlease

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
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

// WatchRelease implements [elector.ReleaseWatcher]. The channel receives a
// value soon after the named lease is released through any Store on the
// same prefix, or its key is deleted; spurious values are allowed (every
// watcher is woken when the watch starts or starts again, since it may have
// missed a release meanwhile). The channel is never closed and sends never
// block. Call stop once done.
//
// The first WatchRelease or [Store.WatchLease] starts the Store's watch:
// one goroutine and one etcd watch on the whole prefix, on a watcher of its
// own, which [Store.Close] stops. The watch requires a leader: if the
// member it runs on loses its leader, the watch ends and starts again.
// Until it runs, only releases through this Store wake its watchers.
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
	s.pokeLocked(name)
}

// pokeLocked is poke with s.mu held.
func (s *Store) pokeLocked(name string) {
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

// WatchLease implements [elector.LeaseWatcher] on the Store's one watch of
// its prefix (see [Store.WatchRelease]), which keeps a copy of every lease
// under the prefix: the channel receives the current lease of name (the
// zero Lease when it is free: released, deleted or never written) as soon
// as the watch has read the prefix, at once if it already has, and then
// with every write to the lease that the watch delivers, renewals
// included. It holds the latest state only, is never closed, and sends
// never block; after [Store.Close] it receives nothing. Call stop once
// done.
//
// every is not used: the watch delivers every write to the prefix in
// revision order, and the client resumes it where it left off after a
// lost connection. Only when it cannot (the revision was compacted, or the
// member lost its leader) does the watch end; it is then created again,
// with a backoff of up to 5s, and reads the whole prefix again. Waiting
// candidates thus make no etcd call of their own, and the Store makes none
// per lease. The copy costs about 150 bytes per key under the prefix,
// watched or not, for as long as the Store runs: give each application a
// prefix of its own ([WithPrefix]) rather than share the default.
func (s *Store) WatchLease(name string, every time.Duration) (<-chan elector.Lease, func()) {
	sub := &leaseSub{ch: make(chan elector.Lease, 1)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return sub.ch, func() {}
	}
	if s.leases == nil {
		s.leases = make(map[string]*watchedKey)
	}
	k := s.leases[name]
	if k == nil {
		k = &watchedKey{}
		s.leases[name] = k
	}
	if k.subs == nil {
		k.subs = make(map[*leaseSub]struct{})
	}
	k.subs[sub] = struct{}{}
	if s.watch == nil {
		s.watch = s.startWatch()
	} else if s.listRev != 0 {
		s.offer(name, k, sub)
	}
	return sub.ch, sync.OnceFunc(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(k.subs, sub)
		if len(k.subs) == 0 && k.value == nil && s.leases[name] == k {
			delete(s.leases, name) // the copy keeps only the keys that exist
		}
	})
}

// watchedKey is the watch's copy of one lease key, and the WatchLease
// subscribers of its name. The Store's mu guards it.
type watchedKey struct {
	asOf  int64  // the revision at which value is known to be current
	rev   int64  // the key's ModRevision, or the revision it was found deleted at; 0 if never seen
	value []byte // nil if the key does not exist
	subs  map[*leaseSub]struct{}

	decoded bool          // lease and ok are set for rev
	ok      bool          // value is a lease written by etcdlease
	lease   elector.Lease // the zero Lease if released or absent
}

// leaseSub is one WatchLease call.
type leaseSub struct {
	ch   chan elector.Lease
	sent bool  // something was delivered
	last int64 // the watchedKey.rev of what was delivered last
}

// set records that the key of name holds value (nil if absent) as of
// revision asOf, written at revision rev, if that is newer than what the
// copy has, and hands the new state to the subscribers. s.mu is held.
func (s *Store) set(name string, value []byte, rev, asOf int64) {
	k := s.leases[name]
	if k == nil {
		if value == nil || asOf <= s.listRev {
			return // nothing to keep, or covered by the last read
		}
		k = &watchedKey{}
		s.leases[name] = k
	}
	if asOf <= k.asOf {
		return
	}
	k.asOf = asOf
	if value == nil && k.value == nil {
		return // still absent: the same state
	}
	k.value, k.rev, k.decoded = value, rev, false
	if value == nil && len(k.subs) == 0 {
		delete(s.leases, name)
		return
	}
	for sub := range k.subs {
		s.offer(name, k, sub)
	}
}

// offer hands sub the state of k, unless it is the state sub got last or
// not a lease. s.mu is held, and every sender holds it, so the send never
// blocks: the buffer is empty after the drain.
func (s *Store) offer(name string, k *watchedKey, sub *leaseSub) {
	if s.closed.Load() || sub.sent && sub.last == k.rev {
		return
	}
	if !k.decoded {
		k.decoded, k.ok, k.lease = true, true, elector.Lease{}
		if k.value != nil {
			l, released, err := decodeLease(name, &mvccpb.KeyValue{Key: []byte(s.Key(name)), Value: k.value, ModRevision: k.rev})
			switch {
			case err != nil:
				k.ok = false // the candidate's TryAcquire reports it
			case !released:
				k.lease = l
			}
		}
	}
	if !k.ok {
		return
	}
	sub.sent, sub.last = true, k.rev
	select {
	case <-sub.ch:
	default:
	}
	sub.ch <- k.lease
}

// listPage is how many keys each read of the prefix returns at most; tests
// lower it.
var listPage int64 = 1000

// list reads every key under the prefix, at one revision, and makes the
// copy that: keys it did not find are absent.
func (s *Store) list(ctx context.Context) error {
	var (
		kvs []*mvccpb.KeyValue
		rev int64
		key = s.prefix
		end = clientv3.GetPrefixRangeEnd(s.prefix)
	)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(listPage)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		gctx, cancel := context.WithTimeout(ctx, s.opTimeout)
		resp, err := s.client.Get(gctx, key, opts...)
		cancel()
		if err != nil {
			return err
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		kvs = append(kvs, resp.Kvs...)
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leases == nil {
		s.leases = make(map[string]*watchedKey)
	}
	for _, kv := range kvs {
		s.set(strings.TrimPrefix(string(kv.Key), s.prefix), kv.Value, kv.ModRevision, rev)
	}
	for name, k := range s.leases {
		s.set(name, nil, rev, rev) // not found (those found are current as of rev)
		for sub := range k.subs {
			s.offer(name, k, sub) // for those that waited for the first read
		}
	}
	s.listRev = max(s.listRev, rev)
	return nil
}

// dropStates empties the channels of every WatchLease subscriber, so that
// nothing is received after Close. s.mu is held.
func (s *Store) dropStates() {
	for _, k := range s.leases {
		for sub := range k.subs {
			select {
			case <-sub.ch:
			default:
			}
		}
	}
}

// releaseWatch is the one goroutine of a Store that watches its prefix, for
// WatchRelease and WatchLease.
type releaseWatch struct {
	watcher clientv3.Watcher
	cancel  context.CancelFunc
	done    chan struct{} // closed when run returns
	started atomic.Int64  // watches created so far, counted after their read and poke
}

// startWatch starts the watch; s.mu is held.
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
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.dropStates() // it ends at Close only
	}()
	watchOnce := func(ctx context.Context) (bool, error) { return s.watchOnce(ctx, w) }
	backoff.Retry(ctx, watchBackoffMin, watchBackoffMax, watchOnce, func(err error, wait time.Duration) {
		s.log.Warn("etcdlease: watch failed; starting it again",
			"prefix", s.prefix, "retry_in", wait, "err", err)
	})
}

// watchOnce runs one etcd watch on the prefix until it fails or ctx ends.
// ran reports whether etcd created the watch and the prefix was read: a
// watch that fails before that is retried with a growing backoff, so that
// a struggling etcd is not asked for the whole prefix again and again.
func (s *Store) watchOnce(ctx context.Context, w *releaseWatch) (ran bool, err error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := w.watcher.Watch(wctx, s.prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	for resp := range wch {
		if err := resp.Err(); err != nil {
			return ran, err
		}
		if resp.Created {
			// Read what the watch began after: every later write is an
			// event, so no write falls between the two.
			if err := s.list(ctx); err != nil {
				return false, err
			}
			ran = true
			s.pokeAll() // a release may have happened before the watch began
			w.started.Add(1)
			continue
		}
		s.mu.Lock()
		for _, ev := range resp.Events {
			name := strings.TrimPrefix(string(ev.Kv.Key), s.prefix)
			if ev.Type == mvccpb.DELETE {
				s.set(name, nil, ev.Kv.ModRevision, ev.Kv.ModRevision)
			} else {
				s.set(name, ev.Kv.Value, ev.Kv.ModRevision, ev.Kv.ModRevision)
			}
			if ev.Type == mvccpb.DELETE || isReleased(ev.Kv.Value) {
				s.pokeLocked(name)
			}
		}
		s.mu.Unlock()
	}
	if err := ctx.Err(); err != nil {
		return ran, err
	}
	return ran, errors.New("the watch ended")
}

// isReleased reports whether a lease value is released.
func isReleased(v []byte) bool { return bytes.HasPrefix(v, []byte(releasedPrefix)) }
