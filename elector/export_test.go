package elector

// Restore writes l back as the current, unreleased state of its lease, as a
// failover to a standby that lagged or a restore of an older copy would,
// and hands it to the lease's watchers. The memory store has no floor for
// tokens or versions (its rows never go back outside tests), so after a
// Restore they repeat: the elector alone must then keep one leader.
func (m *MemoryStore) Restore(l Lease) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.leases[l.Name]
	if cur == nil {
		cur = new(memoryLease)
		m.leases[l.Name] = cur
	}
	cur.Lease, cur.released = l, false
	m.sendState(l.Name, &cur.Lease)
}
