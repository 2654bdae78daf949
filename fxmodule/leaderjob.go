package fxmodule

import (
	"fmt"
	"reflect"

	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
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
// one for the same J is an error from fx.New). A J that a decorated job
// cannot be returned as (not an interface type, or one with methods other
// than Start, Stop, Unwrap and String; see [decorator.CanDecorate]) and an
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
	return fx.Options(
		fx.Decorate(decorate),
		fx.Invoke(func(J) {}), // build the job even if nothing else asks for it
	)
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
	if err := decorator.CanDecorate[J](); err != nil {
		return fmt.Errorf("fxmodule.LeaderJob[%v](%q): %w", reflect.TypeFor[J](), name, err)
	}
	if err := elector.ValidateName(name); err != nil {
		return fmt.Errorf("fxmodule.LeaderJob[%v]: %w", reflect.TypeFor[J](), err)
	}
	return nil
}
