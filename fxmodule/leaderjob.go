package fxmodule

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/decoratable"
)

// LeaderJob makes the job of type J in the graph leader-aware under the lease
// name. It adds one fx.Decorate for J that calls [NewLeaderJob] with the
// graph's elector.Store and elector.Config (from [Module], or [WithStore]),
// so that everything that asks for J gets the decorated job, and appends an
// OnStart hook that starts it and an OnStop hook that stops it (stopping
// the inner job if it runs, then freeing the lease). It also asks for J, so
// the job is built even if nothing else depends on it.
//
// J must be provided once, by a constructor that does not start the job
// itself; use a distinct interface type per job, such as
// `type PriceRefresher decorator.Job`, and one LeaderJob per J (a second
// one for the same J is an error from fx.New). Give each job a lease name
// of its own: two jobs under one name would share one lease, so only one of
// them would ever run; two LeaderJobs with one name anywhere in an app are
// an error from fx.New naming both types. A J that a decorated job cannot
// be returned as (not an interface type, or one with methods other
// than Start, Stop, Unwrap and String) and an
// invalid lease name are errors from fx.New naming J and the name, returned
// before anything is constructed or opened; LeaderJob never panics.
//
// LeaderJob applies to the module it is used in and the modules inside it.
func LeaderJob[J decorator.Job](name string, opts ...decorator.Option) fx.Option {
	if err := check[J](name); err != nil {
		return fx.Error(err)
	}
	decorate := func(j J, s elector.Store, cfg elector.Config, lc fx.Lifecycle) (J, error) {
		d, err := NewLeaderJob(j, s, name, cfg, opts...)
		if err != nil {
			return d, err
		}
		lc.Append(fx.StartStopHook(d.Start, d.Stop))
		return d, nil
	}
	claim := leaseClaim{name: name, job: reflect.TypeFor[J]()}
	return fx.Options(
		fx.Provide(fx.Annotate(func() leaseClaim { return claim }, fx.ResultTags(claimsGroup))),
		// A module's invokes run before those of the module around it: the
		// names are checked before the jobs are built or the store opened.
		fx.Module("leaderaware", fx.Invoke(fx.Annotate(claim.unique, fx.ParamTags(claimsGroup)))),
		fx.Decorate(decorate),
		fx.Invoke(func(J) {}), // build the job even if nothing else asks for it
	)
}

// claimsGroup is the fx value group of the lease names that the
// LeaderJobs of an app use. Its values are provided to the root of the
// app, so every LeaderJob sees every other one, whatever its module.
const claimsGroup = `group:"fxmodule.leases"`

// leaseClaim is the lease name one LeaderJob uses, and its job type.
type leaseClaim struct {
	name string
	job  reflect.Type
}

// unique returns an error naming the job types if another claim in all
// uses c's lease name.
func (c leaseClaim) unique(all []leaseClaim) error {
	var jobs []string
	for _, o := range all {
		if o.name == c.name {
			jobs = append(jobs, o.job.String())
		}
	}
	if len(jobs) < 2 {
		return nil
	}
	slices.Sort(jobs) // fx hands out group values in random order
	return fmt.Errorf("fxmodule.LeaderJob: jobs %s share the lease name %q, so only one of them would ever run; give each job a lease name of its own",
		strings.Join(jobs, " and "), c.name)
}

// NewLeaderJob returns j decorated with [decorator.Decorate] to run only
// while it holds the lease name in s, campaigning with an elector built from
// cfg. It is what [LeaderJob] does inside fx; without fx, call Start and
// Stop on the result yourself. A J that cannot be decorated, a bad name and a
// bad cfg are errors naming the value (NewLeaderJob never panics); j is then
// returned unchanged.
func NewLeaderJob[J decorator.Job](j J, s elector.Store, name string, cfg elector.Config, opts ...decorator.Option) (J, error) {
	if err := check[J](name); err != nil {
		return j, err
	}
	e, err := elector.New(s, name, cfg)
	if err != nil {
		return j, fmt.Errorf("fxmodule: job %q (%v): %w", name, reflect.TypeFor[J](), err)
	}
	return decorator.Decorate(j, e, opts...), nil
}

// check returns why J or name cannot make a leader job, or nil.
func check[J decorator.Job](name string) error {
	if err := decoratable.Check[J](); err != nil {
		return fmt.Errorf("fxmodule.LeaderJob[%v](%q): %w", reflect.TypeFor[J](), name, err)
	}
	if err := elector.ValidateName(name); err != nil {
		return fmt.Errorf("fxmodule.LeaderJob[%v]: %w", reflect.TypeFor[J](), err)
	}
	return nil
}
