package fxmodule

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/decoratable"
)

// LeaderJob runs the job of type J from the graph on one replica at a time:
// it decorates it with [decorator.Decorate] under the lease name, appends
// an OnStart hook that starts the decorated job and an OnStop hook that
// stops it (stopping the inner job if it runs, then freeing the lease), and
// asks for J, so the job is built even if nothing else depends on it. On
// every replica the job's constructor runs, but the job itself runs on the
// one replica that holds its lease. The elector campaigns in the graph's
// elector.Store with the graph's elector.Config (from [Module], or
// [WithStore]); [WithElector] among opts sets this job's own timings, and
// the other opts are the decorator's. The decorated job is added to the
// app's [Registry].
//
// If the graph provides an elector.Observer (optional), it observes the
// job's elector (as its Config.Observer, unless Module's Config.Elector or
// the job's [WithElector] sets one) and the decorated job
// ([decorator.WithObserver], unless opts set one): one line wires metrics
// into every LeaderJob of the app,
//
//	fx.Provide(func() elector.Observer { return metrics })
//
// and without it nothing is observed. See [NewLeaderJob] for which observer
// the decorated job gets.
//
// J is the type the job's constructor returns, in one of two forms:
//
//   - A concrete type, such as *CacheWarmer from
//     `func NewCacheWarmer(...) *CacheWarmer`: LeaderJob runs the graph's J
//     as a decorated decorator.Job of its own and leaves J in the graph as
//     it is. Everything else that asks for J gets the undecorated job, which
//     it may call but must not Start or Stop itself.
//   - An interface type of the job's own, such as
//     `type PriceRefresher decorator.Job`: LeaderJob replaces J in the graph
//     with the decorated job (one fx.Decorate), so that everything that asks
//     for J gets the decorated one. A decorated job must be returnable as J:
//     an interface with no methods but Start, Stop, Unwrap and String (see
//     [decorator.Decorate]); an interface with more is an error, and its
//     concrete type is the way to run it.
//
// J must be provided once, by a constructor that does not start the job
// itself, and have one LeaderJob (a second one for the same J is an error
// from fx.New). Give each job a lease name of its own: two jobs under one
// name would share one lease, so only one of them would ever run; two
// LeaderJobs with one name anywhere in an app are an error from fx.New
// naming both types. An interface J that cannot be replaced, an invalid
// lease name, a bad [WithElector] and a missing [Module] are errors from
// fx.New naming J and the name and saying what to do, returned before the
// store is opened; so is a J that nothing provides, or whose constructor
// returned nil, once the job is built. LeaderJob never panics.
//
// LeaderJob applies to the module it is used in and the modules inside it.
func LeaderJob[J decorator.Job](name string, opts ...decorator.Option) fx.Option {
	replace := reflect.TypeFor[J]().Kind() == reflect.Interface
	if err := checkJob[J](name, replace, opts); err != nil {
		return fx.Error(err)
	}
	claim := leaseClaim{name: name, job: reflect.TypeFor[J](), opts: opts}
	checks := fx.Options(
		fx.Provide(fx.Annotate(func() leaseClaim { return claim }, fx.ResultTags(claimsGroup))),
		// A module's invokes run before those of the module around it: the
		// claims are checked before the jobs are built or the store opened.
		fx.Module("leaderaware", fx.Invoke(claim.check)),
	)
	if replace {
		decorate := func(p jobParams[J], g graphParams) (J, error) {
			if err := claim.present(!isNil(p.Job)); err != nil {
				return p.Job, err
			}
			return startStop(g, p.Job, name, opts)
		}
		// Build the job even if nothing else asks for it. Asked for as
		// optional, a J that nothing provides reaches decorate, which says
		// what to do.
		return fx.Options(checks, fx.Decorate(decorate), fx.Invoke(storeOpened), fx.Invoke(func(jobParams[J]) {}))
	}
	return fx.Options(checks, fx.Invoke(storeOpened), fx.Invoke(func(p jobParams[J], g graphParams) error {
		if err := claim.present(!isNil(p.Job)); err != nil {
			return err
		}
		_, err := startStop[decorator.Job](g, p.Job, name, opts)
		return err
	}))
}

// jobParams asks for the job optionally, so that LeaderJob can say what to
// do when nothing provides it.
type jobParams[J any] struct {
	fx.In
	Job J `optional:"true"`
}

// graphParams is what a LeaderJob takes from the graph besides its job.
type graphParams struct {
	fx.In
	Store     elector.Store
	Config    elector.Config
	Lifecycle fx.Lifecycle
	Registry  *Registry
	Observer  elector.Observer `optional:"true"`
	Logger    *moduleLogger    `optional:"true"`
	Place     *placeConfig     `optional:"true"`
	Claims    []leaseClaim     `group:"fxmodule.leases"`
}

// startStop decorates j as a D under the lease name, campaigning through
// the app's placement group in the graph's store, with the graph's
// Observer if Module's Config.Elector sets none, adds it to the Registry
// and appends the hooks that start and stop it. The first job of the group
// to stop drains the group first (see [storeGroup.drain]).
func startStop[D decorator.Job](g graphParams, j D, name string, opts []decorator.Option) (D, error) {
	cfg := g.Config
	if cfg.Observer == nil {
		cfg.Observer = g.Observer
	}
	if g.Logger != nil {
		// First, so that a decorator.WithLogger among opts wins.
		opts = append([]decorator.Option{decorator.WithLogger(g.Logger.l)}, opts...)
	}
	if err := checkJob[D](name, true, opts); err != nil {
		return j, err
	}
	ecfg := jobConfig(cfg, opts)
	e, sg, err := g.Registry.elector(g, name, ecfg)
	if err != nil {
		return j, fmt.Errorf("fxmodule: job %q (%v): %w", name, reflect.TypeFor[D](), err)
	}
	d := decorate(j, e, ecfg, opts)
	entry, err := g.Registry.add(name, d, g.Store)
	if err != nil {
		return d, err
	}
	g.Lifecycle.Append(fx.Hook{
		OnStart: func(ctx context.Context) error {
			if err := d.Start(ctx); err != nil {
				return err
			}
			g.Registry.setStarted(entry, true)
			return nil
		},
		OnStop: func(ctx context.Context) error {
			g.Registry.setStarted(entry, false)
			drained := sg.drain(ctx)
			return errors.Join(drained, d.Stop(ctx))
		},
	})
	return d, nil
}

// claimsGroup is the fx value group of the lease names that the
// LeaderJobs of an app use. Its values are provided to the root of the
// app, so every LeaderJob sees every other one, whatever its module.
const claimsGroup = `group:"fxmodule.leases"`

// leaseClaim is one LeaderJob: its lease name, job type and options.
type leaseClaim struct {
	name string
	job  reflect.Type
	opts []decorator.Option
}

// String names the LeaderJob as it is written.
func (c leaseClaim) String() string { return fmt.Sprintf("fxmodule.LeaderJob[%v](%q)", c.job, c.name) }

// checkParams is what a claim is checked against: every claim of the app,
// and what Module provides, if it is there.
type checkParams struct {
	fx.In
	All    []leaseClaim   `group:"fxmodule.leases"`
	Module *moduleMark    `optional:"true"`
	Config elector.Config `optional:"true"`
}

// check returns an error that says what to do if Module is missing, if
// another claim uses c's lease name or job type, or if c's WithElector
// options make a bad elector config with the module's.
func (c leaseClaim) check(p checkParams) error {
	if p.Module == nil {
		return fmt.Errorf("add fxmodule.Module(fxmodule.Config{...}) to the app: %v needs the lease store and elector.Config it provides", c)
	}
	var sameName, sameJob []string
	for _, o := range p.All {
		if o.name == c.name {
			sameName = append(sameName, o.job.String())
		}
		if o.job == c.job {
			sameJob = append(sameJob, fmt.Sprintf("%q", o.name))
		}
	}
	// fx hands out group values in random order.
	slices.Sort(sameName)
	slices.Sort(sameJob)
	switch {
	case len(sameName) > 1:
		return fmt.Errorf("fxmodule.LeaderJob: jobs %s share the lease name %q, so only one of them would ever run; give each job a lease name of its own",
			strings.Join(sameName, " and "), c.name)
	case len(sameJob) > 1:
		return fmt.Errorf("fxmodule.LeaderJob[%v]: one job has several LeaderJobs (lease names %s); keep one",
			c.job, strings.Join(sameJob, " and "))
	}
	if !slices.ContainsFunc(c.opts, func(o decorator.Option) bool { _, ok := o.(electorOption); return ok }) {
		return nil // Module has checked its config
	}
	if err := jobConfig(p.Config, c.opts).Validate(); err != nil {
		return fmt.Errorf("%v: fxmodule.WithElector with Module's Config.Elector: %w", c, err)
	}
	return nil
}

// present returns nil if the graph gave c's job, and otherwise an error
// that says what to do.
func (c leaseClaim) present(ok bool) error {
	if ok {
		return nil
	}
	return fmt.Errorf("provide the job: %v got no %v from the graph (nothing provides it, or its constructor returned nil); "+
		"add fx.Provide with a constructor that returns %v, or use the type the constructor returns as J",
		c, c.job, c.job)
}

// NewLeaderJob returns j decorated with [decorator.Decorate] to run only
// while it holds the lease name in s, campaigning with an elector built from
// cfg and the [WithElector] options among opts. It is what [LeaderJob]
// does inside fx; without fx, call Start and Stop on the result yourself.
// The elector's observer (cfg.Observer, or that of a WithElector among
// opts) observes the decorated job too ([decorator.WithObserver]), unless a
// decorator.WithObserver among opts sets another (or none, with nil). J
// must be a type a decorated job can be returned as: pass a concrete job as
// NewLeaderJob[decorator.Job](j, ...). A J that cannot be decorated, a bad
// name and a bad cfg are errors naming the value (NewLeaderJob never
// panics); j is then returned unchanged.
func NewLeaderJob[J decorator.Job](j J, s elector.Store, name string, cfg elector.Config, opts ...decorator.Option) (J, error) {
	if err := checkJob[J](name, true, opts); err != nil {
		return j, err
	}
	ecfg := jobConfig(cfg, opts)
	e, err := elector.New(s, name, ecfg)
	if err != nil {
		return j, fmt.Errorf("fxmodule: job %q (%v): %w", name, reflect.TypeFor[J](), err)
	}
	return decorate(j, e, ecfg, opts), nil
}

// decorate returns j decorated with e and opts, observed by ecfg's
// Observer unless a decorator.WithObserver among opts sets another.
func decorate[J decorator.Job](j J, e elector.Elector, ecfg elector.Config, opts []decorator.Option) J {
	if ecfg.Observer != nil {
		// First, so that a decorator.WithObserver among opts wins.
		opts = append([]decorator.Option{decorator.WithObserver(ecfg.Observer)}, opts...)
	}
	return decorator.Decorate(j, e, opts...)
}

// checkJob returns why J, name or opts cannot make a leader job, or nil. A
// J that is to be replaced by the decorated job must be one Decorate can
// return.
func checkJob[J decorator.Job](name string, replace bool, opts []decorator.Option) error {
	jt := reflect.TypeFor[J]()
	if replace {
		if err := decoratable.Check[J](); err != nil {
			hint := "use the job's concrete type as J, as its constructor returns it, to run it without replacing J in the graph"
			if jt.Kind() != reflect.Interface {
				hint = "pass the job as a decorator.Job: NewLeaderJob[decorator.Job](j, ...)"
			}
			return fmt.Errorf("fxmodule.LeaderJob[%v](%q): %w; %s", jt, name, err, hint)
		}
	}
	if err := elector.ValidateName(name); err != nil {
		return fmt.Errorf("fxmodule.LeaderJob[%v]: %w", jt, err)
	}
	if err := checkHolder(opts); err != nil {
		return fmt.Errorf("fxmodule.LeaderJob[%v](%q): %w", jt, name, err)
	}
	return nil
}

// isNil reports whether v is nil, or a nil pointer, map, func, chan or slice
// in an interface.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
