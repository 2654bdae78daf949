package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/clock"
	"github.com/leaderaware/leaderaware/internal/fanout"
)

// ErrClosed is returned by the operations of a [Store] after [Store.Close].
var ErrClosed = errors.New("etcdlease: store is closed")

// Store is an [elector.Store] on etcd, one key per lease name under its
// prefix, with the elector's optional interfaces: bulk reads and renewals
// in one transaction, and pushes from one etcd watch of the prefix. A Store
// is safe for concurrent use; Close it when done.
type Store struct {
	client     *clientv3.Client
	ownsClient bool
	prefix     string
	opTimeout  time.Duration
	log        *slog.Logger

	closed    atomic.Bool
	closeOnce sync.Once
	changes   *fanout.Source // runs the watch
}

var _ interface {
	elector.Store
	elector.BulkReader
	elector.BatchRenewer
	elector.Notifier
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
			return elector.Lease{}, s.opErr("acquire", name, 1, err)
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
	return elector.Lease{}, s.opErr("acquire", name, 1, fmt.Errorf("the key changed %d times while the store tried; try again", maxAttempts))
}

// Renew implements [elector.Store] with a compare-and-set in an etcd
// transaction that puts the renewed lease if the key still holds l's term
// (token and holder), unreleased, whichever write of the term it holds;
// otherwise it returns an error wrapping [elector.ErrLeaseLost].
func (s *Store) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	l.TTL = ttl
	r, err := s.RenewMany(ctx, []elector.Lease{l})
	switch {
	case err != nil:
		return elector.Lease{}, err
	case r[0].Token == 0:
		return elector.Lease{}, fmt.Errorf("etcdlease: renew lease %q token %d of %q: %w", l.Name, l.Token, l.Holder, elector.ErrLeaseLost)
	}
	return r[0], nil
}

// RenewMany implements [elector.BatchRenewer] with Renew's compare-and-set
// for each term, in one etcd transaction per 64 terms.
func (s *Store) RenewMany(ctx context.Context, terms []elector.Lease) ([]elector.Lease, error) {
	names := make(map[string]bool, len(terms))
	for _, l := range terms {
		if err := s.check(l.Name, l.TTL); err != nil {
			return nil, err
		}
		if names[l.Name] {
			return nil, fmt.Errorf("etcdlease: renew: lease %q is given twice; renew each lease once", l.Name)
		}
		names[l.Name] = true
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	out := make([]elector.Lease, len(terms))
	for i := 0; i < len(terms); i += batch {
		part := terms[i:min(i+batch, len(terms))]
		renewed := make([]elector.Lease, len(part))
		resps, err := s.whileTerms(ctx, part, func(j int) []clientv3.Op {
			l := part[j]
			renewed[j] = elector.Lease{Name: l.Name, Holder: l.Holder, Token: l.Token, TTL: l.TTL, Written: clock.Wall().UTC()}
			return []clientv3.Op{clientv3.OpPut(s.Key(l.Name), record{Token: l.Token, Holder: l.Holder, TTL: l.TTL.String(), Written: renewed[j].Written}.encode())}
		})
		if err != nil {
			return nil, s.opErr("renew", part[0].Name, len(part), err)
		}
		for j, resp := range resps {
			if resp != nil {
				out[i+j] = renewed[j]
				out[i+j].Version = uint64(resp.Header.Revision)
			}
		}
	}
	return out, nil
}

// Release implements [elector.Store] with a compare-and-set like Renew's
// that marks the lease released if the key still holds l's term, keeping
// its token. Otherwise it changes nothing and returns nil.
func (s *Store) Release(ctx context.Context, l elector.Lease) error {
	if err := s.check(l.Name, time.Second); err != nil {
		return err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	put := clientv3.OpPut(s.Key(l.Name), record{Released: true, Token: l.Token, Holder: l.Holder, TTL: l.TTL.String(), Written: clock.Wall().UTC()}.encode())
	if _, err := s.whileTerms(ctx, []elector.Lease{l}, func(int) []clientv3.Op { return []clientv3.Op{put} }); err != nil {
		return s.opErr("release", l.Name, 1, err)
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
		return elector.Lease{}, s.opErr("get", name, 1, err)
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

// GetMany implements [elector.BulkReader] with one linearizable read of
// the keys per 64 names, in one etcd transaction. A key that holds no
// lease written by etcdlease is reported free, so that the other names
// still are read and the candidate's TryAcquire reports it, naming the key.
func (s *Store) GetMany(ctx context.Context, names []string) ([]elector.Lease, error) {
	for _, name := range names {
		if err := s.check(name, time.Second); err != nil {
			return nil, err
		}
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	out := make([]elector.Lease, 0, len(names))
	for part := range slices.Chunk(names, batch) {
		gets := make([]clientv3.Op, len(part))
		for i, name := range part {
			gets[i] = clientv3.OpGet(s.Key(name))
		}
		resp, err := s.client.Txn(ctx).Then(gets...).Commit()
		if err != nil {
			return nil, s.opErr("get", part[0], len(part), err)
		}
		for i, r := range resp.Responses {
			l := elector.Lease{Name: part[i]}
			if kvs := r.GetResponseRange().Kvs; len(kvs) > 0 {
				if cur, released, err := decodeLease(part[i], kvs[0]); err == nil && !released {
					l = cur
				}
			}
			out = append(out, l)
		}
	}
	return out, nil
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

// opErr wraps the error of an operation on n leases, the first named name.
func (s *Store) opErr(op, name string, n int, err error) error {
	what := fmt.Sprintf("lease %q", name)
	if n > 1 {
		what = fmt.Sprintf("%d leases (%q, ...)", n, name)
	}
	if s.closed.Load() {
		return fmt.Errorf("etcdlease: %s %s: %w (%v)", op, what, ErrClosed, err)
	}
	return fmt.Errorf("etcdlease: %s %s on etcd %s: %w", op, what, strings.Join(s.client.Endpoints(), ","), err)
}
