// Package decorator makes an existing background job run on exactly one
// replica at a time.
//
// A [Job] is anything with Start(ctx) error and Stop(ctx) error, the shape
// fx runs. [Decorate] returns a job of the same interface type that, when
// started, campaigns for leadership with an [elector.Elector] and starts the
// real ("inner") job only while this replica holds a term:
//
//	job := decorator.Decorate[decorator.Job](prices, e,
//		decorator.WithMiddleware(decorator.Recover(), decorator.Log(logger)),
//		decorator.WithHooks(decorator.Hooks{OnError: report}))
//	_ = job.Start(ctx) // returns at once
//	...
//	_ = job.Stop(ctx)  // stops the inner job, then frees the lease
//
// # Lifecycle
//
// Start launches one goroutine, the leader gate, and returns nil. The gate
// loops until Stop:
//
//   - Campaign. An elector error is reported (OnError) and retried after a
//     backoff (see [WithBackoff]).
//   - Elected: OnElected runs, then the inner Start, with a context that has
//     the values of the decorated Start's context but not its cancellation,
//     and the [elector.Term] (see [elector.TermFromContext]). The start
//     timeout bounds the two together ([WithStartTimeout] says what happens
//     when it passes).
//   - If the inner Start fails or panics: the term is resigned, the error
//     reported (OnError), OnDemoted runs with it as cause, and after a
//     backoff the gate campaigns again.
//   - If the term ends on its own (lost or expired): the inner Stop runs
//     with a fresh context bounded by the stop timeout ([WithStopTimeout]),
//     the term is settled, OnDemoted runs with the term's error, and the
//     gate campaigns again at once.
//   - If Stop is called: the inner Stop runs with Stop's context, bounded by
//     the stop timeout counted from the call, the term is settled, OnDemoted
//     runs, and the gate exits. Stop returns then, or earlier with an error
//     when its context ends or the stop timeout passes.
//
// Settling a term keeps another replica from starting the job while it may
// still run here. The lease is freed (the term resigned) only if the inner
// job never started or its Stop returned nil. An inner Stop that fails, or
// whose context ends, is called once more with the same values but no
// cancellation, for the rest of the stop timeout, while the term stays held
// (renewing). If that fails too, or the stop timeout passes first, the term
// is abandoned and the failure reported: renewals stop and the lease runs
// out in the store, so another replica takes over one TTL later. An inner
// Stop that never returns is abandoned at the stop timeout too, but the gate
// stays in it: nothing can end a call that never returns.
//
// Every OnElected is followed by exactly one OnDemoted, once the term is
// settled. Panics in the inner job, the elector and the hooks are recovered;
// none escapes. A running decorated job has at most two goroutines (the gate
// and the term's renewal inside the elector), plus a short-lived watchdog
// when a timeout passes, and none after Stop, unless a call it waits for
// never returns.
//
// # What the inner job must do
//
// The inner Start's context is for starting only: it ends when the inner
// Start returns (or at the start timeout), so a job whose Start runs
// "go loop(ctx)" with it would lead while running nothing; give the work a
// context that keeps the values but ends at the inner Stop, as
// [github.com/leaderaware/leaderaware/jobs.Run] does, and watch
// [elector.Term.Done] for work that must end with the term itself.
//
// The term in the inner job's contexts belongs to the decorated job: the job
// may read its Token and Lease and watch its Done channel (a term can end
// while the job runs, and its Start context is not cancelled when it does),
// but must not Resign or Abandon it; to step down, the application calls
// Stop. A term that ends on its own ends TTL/10 before the store lets
// another replica acquire: a job that must never overlap its successor
// should stop within that margin ([WithStopTimeout] bounds the context it
// gets); fenced writes refuse a slower job's writes either way. Do not call
// the decorated job's Stop from a hook or from the inner job: the gate would
// wait for itself (until the stop timeout).
//
// # Built once
//
// The middleware chain ([WithMiddleware], [Chain]), the composed [Hooks]
// and the options are fixed by Decorate. Start/Stop cycles add no layers,
// no goroutines and no hooks, and Decorate mutates nothing it is given.
//
// # Observing
//
// [WithObserver] reports the job's elections, demotions (with their cause)
// and inner Start and Stop calls to an [elector.Observer], such as the
// Prometheus and OpenTelemetry adapters in contrib/; the inner job's
// contexts carry it, so fenced writes report to it too. The job Decorate
// returns is also a [Status] ([StatusOf]): whether it leads, a [Snapshot]
// of its term, and a health check ([HealthCheck]) that fails only while an
// inner Start or Stop has overrun its timeout and not returned, the job
// possibly running after its term was abandoned. Followers are healthy:
// never gate readiness on leadership.
//
// # Stock middleware
//
// [Recover] turns panics into a *[PanicError], and [Log] logs each call with
// the lease, holder and fencing token of its term. The start and stop
// timeouts already bound the contexts the inner job gets.
package decorator
