// Package peers benchmarks leaderaware's elector side by side with a peer,
// Kubernetes client-go's tools/leaderelection, so that the numbers in
// bench/README.md can be reproduced.
//
// It is a separate Go module (github.com/leaderaware/leaderaware/bench/peers)
// so that client-go and its dependencies never enter the main module's go.mod:
// `go build ./...`, `go vet ./...` and `go test ./...` run at the repository
// root do not descend into it. It uses the main module through a replace
// directive (../..), so it always measures the working tree.
//
// Each scenario runs two candidates for one lease in one process:
//
//   - leaderaware: two elector.LeaseElectors on one elector.MemoryStore.
//   - client-go: two leaderelection.LeaderElectors, each with its own
//     resourcelock.LeaseLock on one fake.NewSimpleClientset().
//
// Both get the same TTL (1.5s, 2s, and 15s, the default of both libraries)
// with each library's renewal and retry settings for it (see the timings
// variables in peers_test.go). The benchmarks are:
//
//   - BenchmarkHandoff: the leader steps down gracefully (leaderaware:
//     Term.Resign; client-go: cancel the leader's context with
//     ReleaseOnCancel); the wall time until the other candidate's job runs.
//   - BenchmarkCrashFailover: every store or API call of the leader fails from
//     one instant on, as if its process had been killed; the wall time from
//     then, and from the leader's last renewal, until the other candidate,
//     already waiting, runs its job, and how long the old leader's job still
//     ran after that (two leaders at once).
//   - BenchmarkFrozenLeader: every store or API call of the leader hangs from
//     one instant on (a SIGSTOP-like freeze of its connection); the same
//     figures, and a check that leaderaware's new leader never starts before
//     the lease has gone unrenewed for a whole TTL, nor before the old
//     leader's trust window closed.
//   - BenchmarkGoroutines: goroutines per running candidate while one leads
//     and one waits.
//
// A fake clientset lives in one process, so client-go's crash is simulated
// in-process, and leaderaware's is too, the same way, for a like-for-like
// comparison; the root module's BenchmarkSQLiteCrashFailover kills a real
// process.
//
// Everything runs on the real clock (client-go cannot run in a
// testing/synctest bubble). Each benchmark iteration runs five scenarios at
// once, each in a store of its own; the figures are the median and the
// largest over every scenario of the run. Run:
//
//	cd bench/peers && go test -run '^$' -bench . -benchtime=3x ./...
//
// The command cmd/charts turns this output and the root module's into the
// PNG charts in bench/; see README.md.
package peers
