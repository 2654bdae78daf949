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
// implements [LeaseWatcher] and [ReleaseWatcher]: candidates that wait on it
// learn of every write at once, and make no calls while they wait. The zero
// value is not usable; call [NewMemoryStore].
type MemoryStore struct {
	mu       sync.Mutex
	leases   map[string]*memoryLease                // updated in place, never deleted: tokens never reset
	watchers map[string]map[*chan struct{}]struct{} // by lease name
	states   map[string]map[*chan Lease]struct{}    // by lease name
}

type memoryLease struct {
	Lease
	released bool
}

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{
		leases:   make(map[string]*memoryLease),
		watchers: make(map[string]map[*chan struct{}]struct{}),
		states:   make(map[string]map[*chan Lease]struct{}),
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
	cur.Lease = Lease{Name: name, Holder: holder, Token: cur.Token + 1, Version: cur.Version + 1, TTL: ttl, Written: clock.Wall()}
	cur.released = false
	m.sendState(name, &cur.Lease)
	return cur.Lease, nil
}

// Renew implements [Store].
func (m *MemoryStore) Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	if err := checkArgs(ctx, l.Name, ttl); err != nil {
		return Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.current(l)
	if cur == nil {
		return Lease{}, fmt.Errorf("renew lease %q token %d: %w", l.Name, l.Token, ErrLeaseLost)
	}
	cur.Version++
	cur.TTL, cur.Written = ttl, clock.Wall()
	m.sendState(l.Name, &cur.Lease)
	return cur.Lease, nil
}

// Release implements [Store]. It wakes the watchers of the lease.
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
	cur.Version++
	cur.Written = clock.Wall()
	cur.released = true
	m.sendState(l.Name, &Lease{})
	for ch := range m.watchers[l.Name] {
		select {
		case *ch <- struct{}{}:
		default:
		}
	}
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

// WatchRelease implements [ReleaseWatcher].
func (m *MemoryStore) WatchRelease(name string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	m.mu.Lock()
	defer m.mu.Unlock()
	set := m.watchers[name]
	if set == nil {
		set = make(map[*chan struct{}]struct{})
		m.watchers[name] = set
	}
	set[&ch] = struct{}{}
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			delete(set, &ch)
			if len(set) == 0 {
				delete(m.watchers, name)
			}
		})
	}
}

// WatchLease implements [LeaseWatcher]: every write sends the new state at
// once, so every is not needed.
func (m *MemoryStore) WatchLease(name string, every time.Duration) (<-chan Lease, func()) {
	ch := make(chan Lease, 1)
	m.mu.Lock()
	defer m.mu.Unlock()
	set := m.states[name]
	if set == nil {
		set = make(map[*chan Lease]struct{})
		m.states[name] = set
	}
	set[&ch] = struct{}{}
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			delete(set, &ch)
			if len(set) == 0 {
				delete(m.states, name)
			}
		})
	}
}

// sendState hands *l, the new state of name, to its state watchers, each
// keeping only the latest. m.mu is held.
func (m *MemoryStore) sendState(name string, l *Lease) {
	for ch := range m.states[name] {
		select {
		case <-*ch: // drop the state it has not read
		default:
		}
		*ch <- *l // never blocks: the buffer is empty and only we send
	}
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
