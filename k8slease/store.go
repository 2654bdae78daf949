package k8slease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/clock"
	"github.com/leaderaware/leaderaware/internal/fanout"
)

// ErrClosed is returned by the operations of a [Store] after [Store.Close].
var ErrClosed = errors.New("k8slease: store is closed")

// maxAttempts bounds how often TryAcquire starts again when the Lease
// changed between its read and its write.
const maxAttempts = 5

// listPage is how many Leases each page of GetMany's List holds at most.
const listPage = 500

// Store is an [elector.Store] on coordination.k8s.io/v1 Lease objects in
// one namespace, one object per lease name (see [ObjectName]), every write
// a compare-and-set (see the package documentation), with the elector's
// bulk reads and pushes from one watch of the namespace. A Store is safe
// for concurrent use; Close it when done.
type Store struct {
	leases    coordinationclient.LeaseInterface
	namespace string
	opTimeout time.Duration
	log       *slog.Logger

	mu      sync.Mutex
	closed  bool
	high    map[string]uint64 // the largest token seen, by object name
	changes *fanout.Source    // runs the watch
}

var _ interface {
	elector.Store
	elector.BulkReader
	elector.Notifier
} = (*Store)(nil)

// New returns a Store on the Leases of namespace through client, which the
// caller keeps. New does not contact the API server: a client without the
// rights of the Role in the package documentation fails at its first
// operation, with the API server's error naming the verb, resource and
// namespace.
func New(client kubernetes.Interface, namespace string, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, errors.New("k8slease: New: nil client")
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return nil, fmt.Errorf("k8slease: New: namespace %q is not a namespace name: %s", namespace, errs[0])
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	s := &Store{
		leases:    client.CoordinationV1().Leases(namespace),
		namespace: namespace,
		opTimeout: o.opTimeout,
		log:       o.logger,
		high:      make(map[string]uint64),
	}
	s.changes = fanout.New(s.watch)
	return s, nil
}

// Namespace returns the namespace of the store's Lease objects.
func (s *Store) Namespace() string { return s.namespace }

// TryAcquire implements [elector.Store]: it reads the Lease and, if it is
// free (absent, or without a holder) or still exactly observed, writes the
// new term with an update that carries the resourceVersion it read (or a
// create), which the API server refuses if the Lease changed meanwhile.
// Otherwise it returns a *[elector.HeldError] with the Lease it read. The
// new term's token is larger than the Lease's last token, than any this
// Store has seen of the name, and than the wall clock in microseconds, so
// that a deleted Lease does not take tokens back.
func (s *Store) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	obj, err := s.check(name, ttl)
	if err != nil {
		return elector.Lease{}, err
	}
	if err := elector.ValidateHolder(holder); err != nil {
		return elector.Lease{}, err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	for range maxAttempts {
		cur, err := s.leases.Get(ctx, obj, metav1.GetOptions{})
		var rec record
		switch {
		case apierrors.IsNotFound(err):
			cur = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: obj, Namespace: s.namespace}}
		case err != nil:
			return elector.Lease{}, s.opErr("get", name, err)
		default:
			if rec, err = s.decode(cur); err != nil {
				return elector.Lease{}, err
			}
			if rec.holder != "" && !rec.same(observed) {
				return elector.Lease{}, &elector.HeldError{Lease: s.lease(name, rec)}
			}
		}
		now := wallMicro()
		startTerm(cur, holder, ttl, s.nextToken(obj, rec.token, now), now)
		var out *coordinationv1.Lease
		if cur.ResourceVersion == "" {
			out, err = s.leases.Create(ctx, cur, metav1.CreateOptions{})
		} else {
			out, err = s.leases.Update(ctx, cur, metav1.UpdateOptions{})
		}
		switch {
		case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
			continue // changed since the read: read it again
		case err != nil:
			return elector.Lease{}, s.opErr("write", name, err)
		}
		if rec, err = s.decode(out); err != nil {
			return elector.Lease{}, err
		}
		return s.lease(name, rec), nil
	}
	return elector.Lease{}, s.opErr("acquire", name, fmt.Errorf("the Lease changed %d times while the store tried; try again", maxAttempts))
}

// Renew implements [elector.Store] with one JSON patch that tests that the
// Lease still holds l's term (token, holder) and sets its renewTime, TTL and
// leaseDurationSeconds; the API server applies the tests and the write
// atomically. Otherwise it returns an error wrapping [elector.ErrLeaseLost].
func (s *Store) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	obj, err := s.check(l.Name, ttl)
	if err != nil {
		return elector.Lease{}, err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	out, err := s.patchTerm(ctx, obj, l, renewPatch(l, ttl, wallMicro()))
	switch {
	case err != nil:
		return elector.Lease{}, s.opErr("renew", l.Name, err)
	case out == nil:
		return elector.Lease{}, fmt.Errorf("k8slease: renew lease %q token %d of %q: %w", l.Name, l.Token, l.Holder, elector.ErrLeaseLost)
	}
	rec, err := s.decode(out)
	if err != nil {
		return elector.Lease{}, err
	}
	return s.lease(l.Name, rec), nil
}

// Release implements [elector.Store] with a JSON patch like Renew's that
// clears holderIdentity, as client-go's ReleaseOnCancel does, if the Lease
// still holds l's term. Otherwise it changes nothing and returns nil.
func (s *Store) Release(ctx context.Context, l elector.Lease) error {
	obj, err := s.check(l.Name, time.Second)
	if err != nil {
		return err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	if _, err := s.patchTerm(ctx, obj, l, releasePatch(l, wallMicro())); err != nil {
		return s.opErr("release", l.Name, err)
	}
	return nil
}

// Get implements [elector.Store] with one read of the Lease, which the API
// server serves from etcd with a quorum read.
func (s *Store) Get(ctx context.Context, name string) (elector.Lease, error) {
	obj, err := s.check(name, time.Second)
	if err != nil {
		return elector.Lease{}, err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	cur, err := s.leases.Get(ctx, obj, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return elector.Lease{}, fmt.Errorf("k8slease: lease %q: %w", name, elector.ErrNoLease)
	case err != nil:
		return elector.Lease{}, s.opErr("get", name, err)
	}
	rec, err := s.decode(cur)
	if err != nil {
		return elector.Lease{}, err
	}
	if rec.holder == "" {
		return elector.Lease{}, fmt.Errorf("k8slease: lease %q: %w", name, elector.ErrNoLease)
	}
	return s.lease(name, rec), nil
}

// GetMany implements [elector.BulkReader] with one consistent List of the
// Leases of the namespace, page by page, of which it keeps those of names.
// A Lease that does not decode is reported free, so that the other names
// still are read and the candidate's TryAcquire reports it.
func (s *Store) GetMany(ctx context.Context, names []string) ([]elector.Lease, error) {
	objs := make(map[string][]int, len(names)) // indexes in names, by object name
	for i, name := range names {
		obj, err := s.check(name, time.Second)
		if err != nil {
			return nil, err
		}
		objs[obj] = append(objs[obj], i)
	}
	out := make([]elector.Lease, len(names))
	for i, name := range names {
		out[i] = elector.Lease{Name: name}
	}
	if len(names) == 0 {
		return out, nil
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	opts := metav1.ListOptions{Limit: listPage}
	for {
		page, err := s.leases.List(ctx, opts)
		if err != nil {
			return nil, s.opErr("list", names[0], err)
		}
		for j := range page.Items {
			is := objs[page.Items[j].Name]
			if len(is) == 0 {
				continue
			}
			if rec, err := s.decode(&page.Items[j]); err == nil && rec.holder != "" {
				for _, i := range is {
					out[i] = s.lease(names[i], rec)
				}
			}
		}
		if page.Continue == "" {
			return out, nil
		}
		opts.Continue = page.Continue
	}
}

// patchTerm applies patch, which tests that the Lease holds l's term, and
// returns the patched Lease, or nil if the Lease no longer holds the term.
// The API server answers a failed test with 422, as it does other invalid
// patches: a read tells the two apart (a term never comes back).
func (s *Store) patchTerm(ctx context.Context, obj string, l elector.Lease, patch []byte) (*coordinationv1.Lease, error) {
	out, err := s.leases.Patch(ctx, obj, types.JSONPatchType, patch, metav1.PatchOptions{})
	switch {
	case err == nil:
		return out, nil
	case apierrors.IsNotFound(err):
		return nil, nil
	case !apierrors.IsInvalid(err):
		return nil, err
	}
	cur, gerr := s.leases.Get(ctx, obj, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(gerr):
		return nil, nil
	case gerr != nil:
		return nil, errors.Join(err, gerr)
	}
	rec, derr := s.decode(cur)
	if derr != nil || rec.ours && rec.token == l.Token && rec.holder == l.Holder {
		return nil, err // still the term: the patch was refused for another reason
	}
	return nil, nil
}

// Close stops the store's lease watch and waits for its goroutine.
// Operations after Close return [ErrClosed]. Close is idempotent and
// returns nil.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.changes.Close()
	return nil
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// check validates what every operation gets and returns the object name.
func (s *Store) check(name string, ttl time.Duration) (string, error) {
	if s.isClosed() {
		return "", ErrClosed
	}
	if err := elector.ValidateTTL(ttl); err != nil {
		return "", err
	}
	return ObjectName(name)
}

// withTimeout bounds ctx by the operation timeout if it has no deadline.
func (s *Store) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.opTimeout)
}

// decode decodes obj and records its token as seen.
func (s *Store) decode(obj *coordinationv1.Lease) (record, error) {
	rec, err := decode(obj)
	if err != nil {
		return rec, err
	}
	s.mu.Lock()
	s.high[obj.Name] = max(s.high[obj.Name], rec.token)
	s.mu.Unlock()
	return rec, nil
}

// lease returns the lease of rec with the store's largest token of name.
func (s *Store) lease(name string, rec record) elector.Lease {
	obj, _ := ObjectName(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	return rec.lease(name, s.high[obj])
}

// nextToken returns the token of a new term on the Lease obj whose last
// token is last, at now.
func (s *Store) nextToken(obj string, last uint64, now time.Time) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := max(last, s.high[obj]) + 1
	if floor := uint64(now.UnixMicro()); t < floor {
		t = floor
	}
	s.high[obj] = t
	return t
}

// wallMicro is the wall clock to the microsecond, as Lease objects keep it.
func wallMicro() time.Time { return clock.Wall().UTC().Truncate(time.Microsecond) }

func (s *Store) opErr(op, name string, err error) error {
	if s.isClosed() {
		return fmt.Errorf("k8slease: %s lease %q: %w (%v)", op, name, ErrClosed, err)
	}
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("k8slease: %s lease %q in namespace %q: %w; grant the client the Role in k8slease's documentation "+
			"(get, list, watch, create, update and patch on leases.coordination.k8s.io)", op, name, s.namespace, err)
	}
	return fmt.Errorf("k8slease: %s lease %q in namespace %q: %w", op, name, s.namespace, err)
}
