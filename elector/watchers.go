package elector

import "time"

// ReleaseWatcher was an optional interface of a [Store] that told waiting
// candidates of a release.
//
// Deprecated: the elector no longer uses it; a Store implements [Notifier]
// instead. It goes once no store of this module declares it.
type ReleaseWatcher interface {
	WatchRelease(name string) (released <-chan struct{}, stop func())
}

// LeaseWatcher was an optional interface of a [Store] that watched leases
// in bulk.
//
// Deprecated: the elector no longer uses it; a Store implements
// [BulkReader] and [Notifier] instead. It goes once no store of this module
// declares it.
type LeaseWatcher interface {
	WatchLease(name string, every time.Duration) (states <-chan Lease, stop func())
}
