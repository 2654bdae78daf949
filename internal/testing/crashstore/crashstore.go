// Package crashstore gives each simulated replica its own Store over one
// shared elector.MemoryStore, one that can crash: from Crash on, every call
// fails and no change is pushed, as for a process that froze or lost its
// network while its jobs still run. Each replica's Store is its own value,
// so the elector gives it its own renewal schedule and watch, as it does a
// process.
package crashstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// ErrCrashed is the error of every call after Crash.
var ErrCrashed = errors.New("crashstore: crashed: the store is unreachable")

// Store is one replica's view of a MemoryStore. It implements elector.Store,
// BulkReader, BatchRenewer and Notifier, and remembers when its last
// successful write of each lease began.
type Store struct {
	mem *elector.MemoryStore

	mu        sync.Mutex // held across each write, so Crash waits for the one in flight
	crashed   atomic.Bool
	lastWrite map[string]time.Time
}

// New returns a Store over mem.
func New(mem *elector.MemoryStore) *Store {
	return &Store{mem: mem, lastWrite: map[string]time.Time{}}
}

// Crash makes every later call fail, once the write in flight has returned.
func (s *Store) Crash() {
	s.mu.Lock()
	s.crashed.Store(true)
	s.mu.Unlock()
}

// Crashed reports whether Crash was called. It takes no lock: the
// MemoryStore pushes changes under its own, which a write holds inside s.mu.
func (s *Store) Crashed() bool { return s.crashed.Load() }

// LastWrite returns when the last successful acquire or renewal of the lease
// name through s began, or the zero time.
func (s *Store) LastWrite(name string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastWrite[name]
}

// write runs op unless crashed, recording when the writes it returns began.
func (s *Store) write(op func() ([]elector.Lease, error)) ([]elector.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.crashed.Load() {
		return nil, ErrCrashed
	}
	start := time.Now()
	ls, err := op()
	for _, l := range ls {
		if l.Token != 0 {
			s.lastWrite[l.Name] = start
		}
	}
	return ls, err
}

// one is write for a call that returns one lease.
func (s *Store) one(op func() (elector.Lease, error)) (elector.Lease, error) {
	var l elector.Lease
	_, err := s.write(func() ([]elector.Lease, error) {
		var err error
		l, err = op()
		return []elector.Lease{l}, err
	})
	return l, err
}

// TryAcquire implements elector.Store.
func (s *Store) TryAcquire(ctx context.Context, name, holder string, ttl time.Duration, observed elector.Lease) (elector.Lease, error) {
	return s.one(func() (elector.Lease, error) { return s.mem.TryAcquire(ctx, name, holder, ttl, observed) })
}

// Renew implements elector.Store.
func (s *Store) Renew(ctx context.Context, l elector.Lease, ttl time.Duration) (elector.Lease, error) {
	return s.one(func() (elector.Lease, error) { return s.mem.Renew(ctx, l, ttl) })
}

// RenewMany implements elector.BatchRenewer.
func (s *Store) RenewMany(ctx context.Context, terms []elector.Lease) ([]elector.Lease, error) {
	return s.write(func() ([]elector.Lease, error) { return s.mem.RenewMany(ctx, terms) })
}

// Release implements elector.Store.
func (s *Store) Release(ctx context.Context, l elector.Lease) error {
	_, err := s.write(func() ([]elector.Lease, error) { return nil, s.mem.Release(ctx, l) })
	return err
}

// Get implements elector.Store.
func (s *Store) Get(ctx context.Context, name string) (elector.Lease, error) {
	if s.Crashed() {
		return elector.Lease{}, ErrCrashed
	}
	return s.mem.Get(ctx, name)
}

// GetMany implements elector.BulkReader.
func (s *Store) GetMany(ctx context.Context, names []string) ([]elector.Lease, error) {
	if s.Crashed() {
		return nil, ErrCrashed
	}
	return s.mem.GetMany(ctx, names)
}

// Notify implements elector.Notifier: changes are passed on until Crash.
func (s *Store) Notify(changed func(elector.Change)) (stop func()) {
	return s.mem.Notify(func(c elector.Change) {
		if !s.Crashed() {
			changed(c)
		}
	})
}

var (
	_ elector.Store        = (*Store)(nil)
	_ elector.BulkReader   = (*Store)(nil)
	_ elector.BatchRenewer = (*Store)(nil)
	_ elector.Notifier     = (*Store)(nil)
)
