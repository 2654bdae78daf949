// Package jobs holds [Every], the building block for periodic background
// jobs, and (in its subpackages) the reference jobs of leaderaware: price
// refresh (pricerefresh), a webhook retry worker (webhookretry) and airdrop
// expiry (airdropexpiry).
//
// A job here is anything with Start(ctx) error and Stop(ctx) error, the
// shape that fx runs and that decorator.Decorate wraps. The jobs know nothing
// of leadership: the decorator starts them when their replica is elected and
// stops them when the term ends. What they do know is that the context given
// to Start carries the leader's term (see elector.TermFromContext), and
// [Every] keeps that context's values, so every write a job makes through a
// [FencedStore] is refused once the term is over, even if the job has not
// noticed yet.
//
// [EveryJob] runs one goroutine between Start and Stop, never overlaps runs,
// and can be started again after Stop any number of times.
package jobs
