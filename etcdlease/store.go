package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/clock"
)

// ErrClosed is returned by the operations of a [Store] after [Store.Close].
var ErrClosed = errors.New("etcdlease: store is closed")

// Store is an [elector.Store] on etcd: one key per lease name under its
// prefix, every write a compare-and-set in one etcd transaction (see the
// package documentation). It also implements [elector.LeaseWatcher] and
// [elector.ReleaseWatcher], with one etcd watch per Store. A Store is safe
// for concurrent use; Close it when done.
type Store struct {
	client     *clientv3.Client
	ownsClient bool
	prefix     string
	opTimeout  time.Duration
	log        *slog.Logger

	closed    atomic.Bool
	closeOnce sync.Once

	mu       sync.Mutex
	watchers map[string]map[chan struct{}]struct{} // by lease name
	watch    *releaseWatch                         // started by the first WatchRelease or WatchLease
	leases   map[string]*watchedKey                // the watch's copy of the prefix, by lease name
	listRev  int64                                 // the revision of the watch's last read of the prefix
}

var _ interface {
	elector.Store
	elector.ReleaseWatcher
	elector.LeaseWatcher
} = (*Store)(nil)

// Client returns the etcd client the store runs on, for fenced operations
// and other work. The caller must not close it; [Store.Close] does, when
// the client came from [Open].
func (s *Store) Client() *clientv3.Client { return s.client }

// Key returns the etcd key of the lease name: the prefix and the name.
func (s *Store) Key(name string) string { return s.prefix + name }

// TryAcquire implements [elector.Store] with compare-and-sets in etcd
// transactions: it puts the new term if the key still holds exactly
// observed (its ModRevision is observed.Version, its value observed's
// term), or is absent, or holds a released lease. The new term's token and
// version are the revision of that write. Otherwise it returns a
// *[elector.HeldError] with the lease the key holds, read in the same
// transaction.
//
// It takes one transaction when the key is as the caller expects (observed,
// or absent if observed is the zero Lease), and one more for each time it
// finds the lease free in another way (released, or deleted).
func (s *Store) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	if err := s.check(name, ttl); err != nil {
		return elector.Lease{}, err
	}
	if err := elector.ValidateHolder(holder); err != nil {
		return elector.Lease{}, err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	key := s.Key(name)
	l := elector.Lease{Name: name, Holder: holder, TTL: ttl, Written: clock.Wall().UTC()}
	put := []clientv3.Op{clientv3.OpPut(key, record{Holder: holder, TTL: ttl.String(), Written: l.Written}.encode())}
	absent := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}
	cmps := absent
	if observed.Token != 0 {
		cmps = isObserved(key, observed)
	}
	for range maxAttempts {
		ok, resp, kv, err := s.cas(ctx, key, cmps, put)
		switch {
		case err != nil:
			return elector.Lease{}, s.opErr("acquire", name, err)
		case ok:
			l.Token, l.Version = uint64(resp.Header.Revision), uint64(resp.Header.Revision)
			return l, nil
		case kv == nil:
			cmps = absent
			continue
		}
		cur, released, err := decodeLease(name, kv)
		switch {
		case err != nil:
			return elector.Lease{}, err
		case !released && !cur.Is(observed):
			return elector.Lease{}, &elector.HeldError{Lease: cur}
		}
		// Free, or observed after all (a value this store's compares did
		// not match, as a later etcdlease might write): take exactly this
		// state.
		cmps = []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)}
	}
	return elector.Lease{}, s.opErr("acquire", name, fmt.Errorf("the key changed %d times while the store tried; try again", maxAttempts))
}

// Renew implements [elector.Store] with a compare-and-set in an etcd
// transaction that puts the renewed lease if the key still holds l's term
// (token and holder), unreleased, whichever write of the term it holds;
// otherwise it returns an error wrapping [elector.ErrLeaseLost]. It takes
// one transaction, and one more if l is not the term's latest write.
func (s *Store) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	if err := s.check(l.Name, ttl); err != nil {
		return elector.Lease{}, err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	r := elector.Lease{Name: l.Name, Holder: l.Holder, Token: l.Token, TTL: ttl, Written: clock.Wall().UTC()}
	put := clientv3.OpPut(s.Key(l.Name), record{Token: l.Token, Holder: l.Holder, TTL: ttl.String(), Written: r.Written}.encode())
	resp, err := s.whileTerm(ctx, l, []clientv3.Op{put})
	switch {
	case err != nil:
		return elector.Lease{}, s.opErr("renew", l.Name, err)
	case resp == nil:
		return elector.Lease{}, fmt.Errorf("etcdlease: renew lease %q token %d of %q: %w", l.Name, l.Token, l.Holder, elector.ErrLeaseLost)
	}
	r.Version = uint64(resp.Header.Revision)
	return r, nil
}

// Release implements [elector.Store] with a compare-and-set like Renew's
// that marks the lease released if the key still holds l's term, keeping
// its token. The write wakes the release watchers of every Store on the
// prefix. Otherwise it changes nothing and returns nil.
func (s *Store) Release(ctx context.Context, l elector.Lease) error {
	if err := s.check(l.Name, time.Second); err != nil {
		return err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	put := clientv3.OpPut(s.Key(l.Name), record{Released: true, Token: l.Token, Holder: l.Holder, TTL: l.TTL.String(), Written: clock.Wall().UTC()}.encode())
	resp, err := s.whileTerm(ctx, l, []clientv3.Op{put})
	if err != nil {
		return s.opErr("release", l.Name, err)
	}
	if resp != nil {
		s.poke(l.Name) // this Store's watchers need not wait for the watch
	}
	return nil
}

// Get implements [elector.Store] with one linearizable read of the key.
func (s *Store) Get(ctx context.Context, name string) (elector.Lease, error) {
	if err := s.check(name, time.Second); err != nil {
		return elector.Lease{}, err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	resp, err := s.client.Get(ctx, s.Key(name))
	if err != nil {
		return elector.Lease{}, s.opErr("get", name, err)
	}
	if len(resp.Kvs) == 0 {
		return elector.Lease{}, fmt.Errorf("etcdlease: lease %q: %w", name, elector.ErrNoLease)
	}
	l, released, err := decodeLease(name, resp.Kvs[0])
	switch {
	case err != nil:
		return elector.Lease{}, err
	case released:
		return elector.Lease{}, fmt.Errorf("etcdlease: lease %q: %w", name, elector.ErrNoLease)
	}
	return l, nil
}

// check validates what every operation gets.
func (s *Store) check(name string, ttl time.Duration) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := elector.ValidateName(name); err != nil {
		return err
	}
	return elector.ValidateTTL(ttl)
}

// withTimeout bounds ctx by the operation timeout if it has no deadline.
func (s *Store) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.opTimeout)
}

func (s *Store) opErr(op, name string, err error) error {
	if s.closed.Load() {
		return fmt.Errorf("etcdlease: %s lease %q: %w (%v)", op, name, ErrClosed, err)
	}
	return fmt.Errorf("etcdlease: %s lease %q on etcd %s: %w", op, name, strings.Join(s.client.Endpoints(), ","), err)
}
