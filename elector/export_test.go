package elector

import "github.com/leaderaware/leaderaware/internal/clock"

// Restore writes l back as the current, unreleased state of its lease, as a
// failover to a standby that lagged or a restore of an older copy would,
// and pushes it to the Notify callbacks. Later writes still get tokens and
// versions above any written before, as a real store's floors give them.
func (m *MemoryStore) Restore(l Lease) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.leases[l.Name]
	if cur == nil {
		cur = new(memoryLease)
		m.leases[l.Name] = cur
	}
	cur.topToken, cur.topVersion = max(cur.topToken, cur.Token), max(cur.topVersion, cur.Version)
	cur.Lease, cur.released = l, false
	m.push(cur)
}

// NewMemoryStoreOn is NewMemoryStore on c: the store stamps Written by c's
// wall clock, and its electors read c.
func NewMemoryStoreOn(c clock.Clock) *MemoryStore {
	m := NewMemoryStore()
	m.clockCarrier = clock.Carry(c)
	return m
}
