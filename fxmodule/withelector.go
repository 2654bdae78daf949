package fxmodule

import (
	"fmt"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

// WithElector sets the elector timings of one job, next to its decorator
// options, for a job whose pace differs from the app's:
//
//	fxmodule.LeaderJob[*Report]("nightly-report",
//		decorator.WithStopTimeout(time.Minute),
//		fxmodule.WithElector(elector.Config{TTL: 2 * time.Minute}),
//	)
//
// The non-zero TTL, RenewInterval, RetryInterval and Observer of cfg
// replace those of Config.Elector of [Module] (and the graph's
// elector.Observer, see [LeaderJob]) for this job; the Observer observes
// the decorated job too. A TTL given without a RenewInterval renews at
// TTL/3 (the elector's default), not at the module's RenewInterval. cfg
// must not set a Holder: the holder names the replica, once, in Module's
// Config.Elector. Bad values, also in combination with the module's, are
// errors from fx.New naming the job, before anything is opened. Later
// WithElector options override earlier ones field by field.
//
// [LeaderJob] and [NewLeaderJob] read it; [decorator.Decorate] ignores it.
// It is a [decorator.Option] only so that it can stand among them.
func WithElector(cfg elector.Config) decorator.Option {
	return electorOption{Option: decorator.WithMiddleware(), cfg: cfg}
}

// electorOption is what WithElector returns. The embedded option adds no
// middleware: it only makes electorOption a decorator.Option.
type electorOption struct {
	decorator.Option
	cfg elector.Config
}

// jobConfig returns the elector config of one job: base, the module's,
// with the settings of the WithElector options among opts.
func jobConfig(base elector.Config, opts []decorator.Option) elector.Config {
	for _, o := range opts {
		e, ok := o.(electorOption)
		if !ok {
			continue
		}
		if e.cfg.TTL != 0 {
			base.TTL, base.RenewInterval = e.cfg.TTL, 0
		}
		if e.cfg.RenewInterval != 0 {
			base.RenewInterval = e.cfg.RenewInterval
		}
		if e.cfg.RetryInterval != 0 {
			base.RetryInterval = e.cfg.RetryInterval
		}
		if e.cfg.Observer != nil {
			base.Observer = e.cfg.Observer
		}
	}
	return base
}

// checkHolder returns an error naming the first WithElector option among
// opts that sets a Holder. Timings are checked together with the module's
// (see [jobConfig]).
func checkHolder(opts []decorator.Option) error {
	for _, o := range opts {
		if e, ok := o.(electorOption); ok && e.cfg.Holder != "" {
			return fmt.Errorf("fxmodule.WithElector with Holder: %q: the Holder names the replica; set it once, in Config.Elector of fxmodule.Module", e.cfg.Holder)
		}
	}
	return nil
}
