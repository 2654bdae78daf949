// Package etcdlease is an [elector.Store] on etcd, for replicas on many
// hosts. It is built on go.etcd.io/etcd/client/v3 and lives in a Go module
// of its own, so that only programs that use it download the etcd client.
//
//	store, err := etcdlease.Open(ctx, []string{"etcd-1:2379", "etcd-2:2379", "etcd-3:2379"})
//	...
//	defer store.Close()
//	e, err := elector.New(store, "price-refresh", elector.Config{})
//
// In an fx application, add fxmodule.WithStore(store) next to
// fxmodule.Module.
//
// # Keys and values
//
// Each lease is one key: the prefix ([DefaultPrefix], [WithPrefix]) and the
// lease name. Its value is JSON, readable with etcdctl:
//
//	$ etcdctl get --prefix leaderaware/leases/
//	leaderaware/leases/price-refresh
//	{"released":false,"token":7310,"holder":"web-1-4242-9f1c2e3a","ttl":"15s","written":"2026-11-30T05:03:39.12Z"}
//
// written is the writer's wall clock, for display only: no replica compares
// it with anything.
//
// # Tokens and versions
//
// The store keeps no clock and no counter of its own; etcd's revision is
// both. A lease's Version is its key's ModRevision, which every write
// raises. A term's Token is the revision of the write that started it; as
// etcd assigns a revision only as it commits the write, that write stores
// "token":0, and every later write of the term (renewal, release) stores
// the token itself. etcd's revision never goes back, compactions and
// deleted keys included, so tokens grow and are never reused even when an
// operator deletes lease keys. One exception: restoring an etcd backup
// takes the revision back to the backup's. Restore with
// `etcdutl snapshot restore --bump-revision N --mark-compacted`, N above
// the revisions written since the backup (a generous 1000000000 costs
// nothing), and tokens keep growing.
//
// # How it works
//
// Get is one linearizable read. Every write is a compare-and-set in one
// etcd transaction that reads the key when the compare fails, so each
// operation is atomic and linearizable as etcd is. Nothing depends on etcd
// leases or sessions, so an expired session or auth token cannot strand a
// holder (as it can in concurrency.Election, etcd issues #17623 and
// #19597):
//
//   - TryAcquire puts the new term if the key is still exactly the observed
//     lease (the same ModRevision, and the same term in the value), or is
//     absent, or is released; otherwise it returns the lease the
//     transaction read, in an *[elector.HeldError].
//   - Renew, Release and fenced writes commit if the key still holds the
//     term, unreleased: the value's leading bytes name its token and
//     holder; on the write that started the term, the ModRevision is the
//     token. Each term's compare and write is a nested transaction (etcd
//     3.3 and later), so RenewMany renews up to 64 terms in one
//     transaction and still learns which terms were lost.
//
// The first compare is what the caller's lease makes likely. When it fails
// but the key the transaction read still allows the operation (a lease
// released or deleted rather than absent, a term renewed since the caller's
// lease), the operation compares that exact state (its ModRevision) in one
// more transaction. Every call has a deadline: its ctx's, or the operation
// timeout ([DefaultOpTimeout], [WithOpTimeout]).
//
// The elector's watch reads leases with GetMany (one transaction per 64
// names) and follows them through Notify: one etcd watch of the prefix
// per Store, which pushes every write under the prefix as the lease's new
// state, so waiting candidates make no etcd call of their own and a
// handoff between hosts takes milliseconds. The client resumes the watch
// after a lost connection; when it cannot (the member lost its leader, or
// compacted the revisions the watch missed), the watch starts again, with
// a backoff of up to 5s, and asks the elector to read every lease again.
// The compare-and-sets stay the correctness path: a renewal the watch
// missed only fails a takeover.
//
// [Store.Fenced] commits etcd operations in one transaction with the
// compare of the term's lease key, taking the term from the context as the
// decorator gives it to jobs; [Store.FencedLease] takes the lease
// explicitly. A stale leader gets an error matching [elector.ErrLeaseLost]
// and commits nothing.
//
// # Tests
//
// The tests run an etcd member embedded in the test process
// (go.etcd.io/etcd/server/v3/embed) on free loopback ports, with its data in
// a temporary directory; they need no network and no etcd binary. On Linux,
// TestFailoverProcesses and TestChaosProcesses run the test binary itself
// as replica processes on that member, and crash, freeze and stop them; the
// chaos schedule runs 20s (-chaos.duration, -chaos.seed). The benchmarks
// include failover times (BenchmarkFailover) and the client CPU of 1,000
// leases (BenchmarkClientCPU).
package etcdlease
