// Package jobs holds the building blocks for background jobs: [Every] for
// periodic work and [Run] for a worker loop. The demo, cmd/leaderd, builds
// its reference jobs (price refresh, webhook retry, airdrop expiry) on them.
//
// A job here is anything with Start(ctx) error and Stop(ctx) error, the
// shape that fx runs and that decorator.Decorate wraps. The jobs know nothing
// of leadership: the decorator starts them when their replica is elected and
// stops them when the term ends. What they do know is that the context given
// to Start carries the leader's term (see elector.TermFromContext), and
// [Every] and [Run] keep that context's values for their function (but not
// its cancellation: the decorator's Start context ends when Start returns),
// so every fenced write a job makes (such as sqlitelease.Store.Fenced) is
// refused once the term is over, even if the job has not noticed yet.
//
// Both run one goroutine between Start and Stop, and can be started again
// after Stop any number of times.
package jobs
