// Package k8slease is an [elector.Store] on Kubernetes coordination.k8s.io/v1
// Lease objects, for replicas that run in a cluster and need no database.
// It is built on k8s.io/client-go and lives in a Go module of its own, so
// that only programs that use it download client-go.
//
//	cfg, err := rest.InClusterConfig()
//	...
//	store, err := k8slease.New(kubernetes.NewForConfigOrDie(cfg), "my-namespace")
//	...
//	defer store.Close()
//	e, err := elector.New(store, "price-refresh", elector.Config{})
//
// In an fx application, add fxmodule.WithStore(store) next to
// fxmodule.Module.
//
// # Lease objects
//
// Each lease is one Lease object in the store's namespace, named by
// [ObjectName] (the lease name itself when it is a valid object name). Its
// spec is what client-go's leader election writes, so `kubectl get lease`
// shows the holder, and a client-go elector (tools/leaderelection with a
// LeaseLock) and a leaderaware one can share a Lease, never both leading,
// while a team moves its replicas from one to the other:
//
//   - holderIdentity is the holder, and empty once released;
//   - acquireTime and renewTime are the holder's wall clock at its acquire and
//     last renewal (for display: no replica compares them with a clock);
//   - leaseDurationSeconds is the TTL rounded up to whole seconds plus one,
//     because client-go candidates compare renewTime in whole seconds;
//   - leaseTransitions counts the changes of holder.
//
// The annotations [AnnotationToken], [AnnotationHolder] and [AnnotationTTL]
// keep the fencing token, the holder of that token's term and its exact TTL
// in milliseconds. A Lease whose holderIdentity is not the annotated holder
// is held by another elector: its TTL is its leaseDurationSeconds.
//
// # Tokens and versions
//
// A lease's Version is the Lease's resourceVersion. k8slease relies on what
// the API server on etcd makes of it, etcd's revision, a decimal integer
// that grows with every write and never goes back; it refuses a Lease whose
// resourceVersion is not one. TryAcquire reads the Lease and writes the new
// term with an update that carries the resourceVersion it read (a
// compare-and-set; a create if there is no Lease): the API server refuses it
// with 409 Conflict if anything wrote the Lease since, and TryAcquire then
// reads it again. Renew and Release are one JSON patch each, whose test
// operations check that the Lease still holds the caller's term (token and
// holder) and which the API server applies atomically.
//
// A new term's token is larger than the Lease's last token, than any token
// the Store has seen of the name, and than the wall clock in microseconds,
// so tokens keep growing after `kubectl delete lease` unless the wall clock
// is also set back. Restoring etcd from a backup takes resourceVersions
// back: restore with `etcdutl snapshot restore --bump-revision N
// --mark-compacted`, as Kubernetes' documentation advises.
//
// Every call has a deadline: its ctx's, or the operation timeout
// ([DefaultOpTimeout], [WithOpTimeout]).
//
// # How it works
//
// The elector's watch reads leases with GetMany, one List of the namespace,
// and follows them through Notify: one watch of the Leases of the
// namespace per Store, which pushes every write as the lease's new state,
// so waiting candidates make no API request of their own and a released
// lease is taken in about one watch event. The watch resumes from the last
// resourceVersion it saw when the API server ends it; after 410 Gone (a
// compacted resourceVersion) it starts anew from the current one and asks
// the elector to read every lease again. The API server has no multi-object
// update, so renewals stay one patch per term.
//
// # Fencing
//
// The API server has no transactions, so there is no Fenced: fence the
// resource a job writes with the term's token instead. Keep the largest
// token that wrote it next to the data (an annotation, a column) and write
// only with a compare-and-set that refuses a smaller token: a
// resourceVersion precondition on a Kubernetes object, or
// `UPDATE ... WHERE fence_token <= $token` in a database.
//
// # RBAC
//
// The client needs this Role in the store's namespace (bound to the
// ServiceAccount of the pods); without it the first campaign fails with the
// API server's error, which names the verb, the resource and the namespace:
//
//	apiVersion: rbac.authorization.k8s.io/v1
//	kind: Role
//	metadata:
//	  name: leaderaware
//	rules:
//	- apiGroups: ["coordination.k8s.io"]
//	  resources: ["leases"]
//	  verbs: ["get", "list", "watch", "create", "update", "patch"]
//
// # Tests
//
// The tests of this store run against a real kube-apiserver with an embedded
// etcd in the test process, in the module
// github.com/leaderaware/leaderaware/k8slease/apiservertest, so that users
// of k8slease never download k8s.io/kubernetes.
package k8slease
