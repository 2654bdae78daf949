// Package leaderprom exports what leaderaware electors and decorated jobs do
// as Prometheus metrics. A [Collector] is both an [elector.Observer] and a
// [prometheus.Collector]: give it to the electors and decorated jobs of a
// replica, and register it once:
//
//	metrics := leaderprom.New()
//	registry.MustRegister(metrics)
//	e, err := elector.New(store, "price-refresh", elector.Config{Observer: metrics})
//	// give the same metrics to the decorated jobs, then serve the registry:
//	http.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
//
// The metrics, each for this replica only:
//
//	leaderaware_leader{lease}                                        gauge: 1 while a decorated job leads, else 0
//	leaderaware_term_token{lease}                                    gauge: fencing token of the current or last term
//	leaderaware_elections_total{lease}                               counter: terms won
//	leaderaware_demotions_total{lease,cause}                         counter: terms ended, by elector.Cause
//	leaderaware_trust_remaining_seconds{lease}                       gauge: how long the term is still trusted; 0 when none
//	leaderaware_fenced_writes_total{lease,result}                    counter: fenced writes, committed or refused
//	leaderaware_store_operation_duration_seconds{op,result}          histogram: store calls
//	leaderaware_job_transition_duration_seconds{lease,phase,result}  histogram: the inner job's Start and Stop
//
// leaderaware_leader and the demotions and job transitions come from the
// decorated jobs; elections, tokens, trust and store calls come from the
// electors or the decorated jobs, counted once per term whichever reports it.
// The sum of leaderaware_leader over the replicas of a lease above 1 means two
// leaders.
//
// No metric has a holder label: the holder is unbounded (host-pid-random by
// default). Labels are the lease name and small enums only. A token is exact
// in the float64 of a sample up to 2^53 (tokens floored at a clock in
// microseconds stay below it).
package leaderprom
