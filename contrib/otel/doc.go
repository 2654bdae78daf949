// Package leaderotel records what leaderaware electors and decorated jobs do
// as OpenTelemetry metrics. An [Observer] is an [elector.Observer]: give it
// to the electors and decorated jobs of a replica:
//
//	observer, err := leaderotel.New(meterProvider)
//	if err != nil {
//		return err
//	}
//	e, err := elector.New(store, "price-refresh", elector.Config{Observer: observer})
//	// and give the same observer to the decorated jobs
//
// The instruments, each for this replica only, all with the attribute
// leaderaware.lease except the store calls:
//
//	leaderaware.leader                   Int64UpDownCounter: +1 when a decorated job is elected, −1 when demoted
//	leaderaware.term.token               Int64Gauge: fencing token of the current or last term
//	leaderaware.elections                Int64Counter: terms won
//	leaderaware.demotions                Int64Counter: terms ended; leaderaware.demotion.cause
//	leaderaware.trust.remaining          Float64ObservableGauge (s): how long the term is still trusted; 0 when none
//	leaderaware.fenced_writes            Int64Counter: fenced writes; leaderaware.fenced_write.result (committed, refused)
//	leaderaware.store.operation.duration Float64Histogram (s): store calls; leaderaware.store.operation, and error.type (held, lost, error) unless the call succeeded
//	leaderaware.job.transition.duration  Float64Histogram (s): the inner job's Start and Stop; leaderaware.job.phase (start, stop), leaderaware.job.result (ok, error)
//
// The sum of leaderaware.leader over the replicas of a lease is the number of
// leaders: above 1 is split brain. leaderaware.leader, the demotions and the
// job transitions come from the decorated jobs; elections, tokens, trust and
// store calls come from the electors or the decorated jobs, counted once per
// term whichever reports it.
//
// No attribute holds the holder: it is unbounded (host-pid-random by
// default). Attributes are the lease name and small enums only.
package leaderotel
