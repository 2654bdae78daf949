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
// Both get the same timings: a lease of 1.5s, renewals every 0.5s (client-go:
// RetryPeriod 0.5s, RenewDeadline 1s) and retries every 0.5s. The benchmarks
// are:
//
//   - BenchmarkHandoff: the leader steps down gracefully (leaderaware:
//     Term.Resign; client-go: cancel the leader's context with
//     ReleaseOnCancel) and the figure is the wall time until the other
//     candidate leads, in ms/handoff.
//   - BenchmarkCrashFailover: every store or API call of the leader fails from
//     one instant on, as if its process had been killed or cut off; the figures
//     are the wall time until the other candidate leads (ms/failover) and how
//     long the old leader still believed it led after that (ms/overlap).
//     It runs at 1.5s and again at 2s, because client-go stores a lease
//     duration in whole seconds and truncates 1.5s to 1s.
//   - BenchmarkGoroutines: goroutines per running candidate while one leads
//     and one waits (goroutines/elector, also per leader and per follower).
//
// Everything runs on the real clock (client-go cannot run in a
// testing/synctest bubble), so one iteration takes up to seconds. Run:
//
//	cd bench/peers && go test -run '^$' -bench . -benchtime=3x ./...
//
// and add -count=10 for benchstat. The ns/op column is suppressed because an
// iteration includes setup and settling waits; the reported metrics are
// means over the iterations of one run.
package peers
