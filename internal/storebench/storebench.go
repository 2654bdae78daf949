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
