// Package storebench holds the benchmarks that run alike on every store:
// the failover of a lease between two Store instances on the real clock
// (Failover), which bench, etcdlease and mysqllease run, and the client
// CPU of 1,000 leases (ClientCPU), which etcdlease and mysqllease run.
package storebench

import "github.com/leaderaware/leaderaware/elector"

// WatchStore is a Store that wakes waiting candidates on release, as every
// store of the library does.
type WatchStore interface {
	elector.Store
	elector.ReleaseWatcher
}

// withLeaseWatcher returns wrapper, a WatchStore that wraps inner, with
// inner's LeaseWatcher too if it has one: embedding hides it, and the
// elector uses it in place of WatchRelease.
func withLeaseWatcher(wrapper, inner WatchStore) elector.Store {
	if lw, ok := inner.(elector.LeaseWatcher); ok {
		return struct {
			WatchStore
			elector.LeaseWatcher
		}{wrapper, lw}
	}
	return wrapper
}
