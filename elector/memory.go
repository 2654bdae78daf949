package elector

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/leaderaware/leaderaware/internal/clock"
)

// MemoryStore is a [Store] in process memory, for tests and single-process
// programs. It runs on fake time inside a testing/synctest bubble. It
// implements [BulkReader], [BatchRenewer] and [CompleteNotifier], pushing
// every write's new state: candidates that wait on it learn of every write at
// once.
// The zero value is not usable; call [NewMemoryStore].
type MemoryStore struct {
	clockCarrier // the clock of its Written stamps and its electors

	mu       sync.Mutex
	leases   map[string]*memoryLease // updated in place, never deleted: tokens never reset
	notified map[*func(Change)]struct{}
}

type memoryLease struct {
	Lease
	released bool
	// The highest token and version ever written: new ones go above
	// them, even after a Restore wrote an older state.
	topToken, topVersion uint64
}

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{
		leases:   make(map[string]*memoryLease),
		notified: make(map[*func(Change)]struct{}),
	}
}

// TryAcquire implements [Store].
func (m *MemoryStore) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed Lease) (Lease, error) {
	if err := checkArgs(ctx, name, ttl); err != nil {
		return Lease{}, err
	}
	if err := ValidateHolder(holder); err != nil {
		return Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.leases[name]
	switch {
	case cur == nil:
		cur = new(memoryLease)
		m.leases[name] = cur
	case !cur.released && !cur.Is(observed):
		return Lease{}, &HeldError{Lease: cur.Lease}
	}
	cur.Lease = Lease{Name: name, Holder: holder, Token: max(cur.Token, cur.topToken) + 1, TTL: ttl}
	cur.released = false
	m.wrote(cur)
	return cur.Lease, nil
}

// Renew implements [Store].
func (m *MemoryStore) Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	if err := checkArgs(ctx, l.Name, ttl); err != nil {
		return Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.renew(l, ttl)
}

// renew renews l for ttl. m.mu is held.
func (m *MemoryStore) renew(l Lease, ttl time.Duration) (Lease, error) {
	cur := m.current(l)
	if cur == nil {
		return Lease{}, fmt.Errorf("renew lease %q token %d: %w", l.Name, l.Token, ErrLeaseLost)
	}
	cur.TTL = ttl
	m.wrote(cur)
	return cur.Lease, nil
}

// RenewMany implements [BatchRenewer].
func (m *MemoryStore) RenewMany(ctx context.Context, terms []Lease) ([]Lease, error) {
	for _, l := range terms {
		if err := checkArgs(ctx, l.Name, l.TTL); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Lease, len(terms))
	for i, l := range terms {
		out[i], _ = m.renew(l, l.TTL) // the zero Lease when lost
	}
	return out, nil
}

// wrote bumps cur's version and stamps the write, and pushes the new state
// to the Notify callbacks. m.mu is held.
func (m *MemoryStore) wrote(cur *memoryLease) {
	cur.Version = max(cur.Version, cur.topVersion) + 1
	cur.topToken, cur.topVersion = max(cur.topToken, cur.Token), cur.Version
	cur.Written = m.Clock().Wall()
	m.push(cur)
}

// push hands the state of cur to the Notify callbacks. m.mu is held.
func (m *MemoryStore) push(cur *memoryLease) {
	c := Change{Name: cur.Name, State: cur.Lease, Known: true}
	if cur.released {
		c.State = Lease{Name: cur.Name}
	}
	for f := range m.notified {
		(*f)(c)
	}
}

// Release implements [Store].
func (m *MemoryStore) Release(ctx context.Context, l Lease) error {
	if err := checkArgs(ctx, l.Name, time.Second); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.current(l)
	if cur == nil {
		return nil
	}
	cur.released = true
	m.wrote(cur)
	return nil
}

// current returns the stored lease if l (its token and holder) is still
// its current, unreleased term, and nil otherwise.
func (m *MemoryStore) current(l Lease) *memoryLease {
	cur := m.leases[l.Name]
	if cur == nil || cur.released || cur.Token != l.Token || cur.Holder != l.Holder {
		return nil
	}
	return cur
}

// Get implements [Store].
func (m *MemoryStore) Get(ctx context.Context, name string) (Lease, error) {
	if err := checkArgs(ctx, name, time.Second); err != nil {
		return Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.leases[name]
	if cur == nil || cur.released {
		return Lease{}, fmt.Errorf("lease %q: %w", name, ErrNoLease)
	}
	return cur.Lease, nil
}

// GetMany implements [BulkReader].
func (m *MemoryStore) GetMany(ctx context.Context, names []string) ([]Lease, error) {
	for _, name := range names {
		if err := checkArgs(ctx, name, time.Second); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Lease, len(names))
	for i, name := range names {
		out[i] = Lease{Name: name}
		if cur := m.leases[name]; cur != nil && !cur.released {
			out[i] = cur.Lease
		}
	}
	return out, nil
}

// Notify implements [Notifier]: every write's new state is pushed, under
// the store's lock, so in the order of the writes. MemoryStore is a
// [CompleteNotifier].
func (m *MemoryStore) Notify(changed func(Change)) (stop func()) {
	f := &changed
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notified[f] = struct{}{}
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.notified, f)
	}
}

// Sync implements [CompleteNotifier]: each write has pushed its state by the
// time it releases the store's lock.
func (m *MemoryStore) Sync(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return ctx.Err()
}

// checkArgs validates what every store operation gets.
func checkArgs(ctx context.Context, name string, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateName(name); err != nil {
		return err
	}
	return ValidateTTL(ttl)
}

// clockCarrier carries a Store's clock to its electors (see clock.Carrier):
// an alias, so that the embedded field is unexported.
type clockCarrier = clock.Carrier
