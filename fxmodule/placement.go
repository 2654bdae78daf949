package fxmodule

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/placement"
)

// placeConfig is Module's Config, for the placement groups of the
// LeaderJobs.
type placeConfig struct{ Config }

// groupName returns the group of an app whose LeaderJobs have the lease
// names leases: Config.Group if set, else "fx-" and the first 12 hex
// digits of the SHA-256 of the sorted names, each ended by a newline, so
// that the replicas of one app, which run the same jobs, make one group.
func (c placeConfig) groupName(leases []string) string {
	if c.Group != "" {
		return c.Group
	}
	names := slices.Clone(leases)
	slices.Sort(names)
	names = slices.Compact(names)
	sum := sha256.Sum256([]byte(strings.Join(names, "\n") + "\n"))
	return "fx-" + hex.EncodeToString(sum[:6])
}

// storeGroup is the placement group of the app's LeaderJobs in one store.
type storeGroup struct {
	store  elector.Store
	g      *placement.Group
	holder string // this replica's

	drainOnce sync.Once
	drainErr  error
}

// drain drains g once, bounded by ctx: the first LeaderJob of the group
// to stop calls it before it stops its job, so that the leases go to the
// other members before any job of this replica stops. The group stays
// draining (its candidates hold back) until its own OnStop hook closes it,
// after every job of the group has stopped. A drain cut short by ctx is
// reported; each job's Stop then frees its own lease.
//
// The drain gets at most half of the time ctx leaves: fx runs no further
// OnStop hook once ctx has ended, so a drain against a store that does not
// answer must leave the jobs' Stop and the group's Close time to run.
func (sg *storeGroup) drain(ctx context.Context) error {
	sg.drainOnce.Do(func() {
		if dl, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Until(dl)/2)
			defer cancel()
		}
		if err := sg.g.Drain(ctx); err != nil {
			sg.drainErr = fmt.Errorf("fxmodule: drain before stopping: %w", err)
		}
	})
	return sg.drainErr
}

// elector returns the elector of the LeaderJob of lease in s with cfg:
// from the app's placement group in s, which it creates (and whose
// lifecycle hooks it appends) for the first job in s.
func (r *Registry) elector(g graphParams, name string, cfg elector.Config) (*elector.LeaseElector, *storeGroup, error) {
	sg, err := r.group(g)
	if err != nil {
		return nil, nil, err
	}
	e, err := sg.g.Elector(name, cfg)
	if err != nil {
		return nil, nil, err
	}
	return e, sg, nil
}

// group returns the placement group of the app in g.Store, creating it on
// the first call for that store: its hooks, appended before those of the
// store's first LeaderJob, join the group before any of its jobs starts
// and close it after they all stopped.
func (r *Registry) group(g graphParams) (*storeGroup, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, sg := range r.groups {
		if sg.store == g.Store {
			return sg, nil
		}
	}
	var pc placeConfig
	if g.Place != nil {
		pc = *g.Place
	}
	names := make([]string, len(g.Claims))
	for i, c := range g.Claims {
		names[i] = c.name
	}
	pc.Elector = g.Config
	cfg := pc.placement(pc.groupName(names))
	cfg.Holder = cmp.Or(cfg.Holder, elector.DefaultHolder())
	if g.Logger != nil {
		cfg.Logger = g.Logger.l
	}
	pg, err := placement.New(g.Store, cfg)
	if err != nil {
		return nil, fmt.Errorf("fxmodule: placement group %q: %w", cfg.Name, err)
	}
	sg := &storeGroup{store: g.Store, g: pg, holder: cfg.Holder}
	r.groups = append(r.groups, sg)
	g.Lifecycle.Append(fx.Hook{OnStart: pg.Start, OnStop: pg.Close})
	return sg, nil
}

// groupOf returns the placement group of the LeaderJob of lease, or of
// the first LeaderJob if lease is "", or nil.
func (r *Registry) groupOf(lease string) *placement.Group {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.store
	for _, e := range r.jobs {
		if e.lease == lease {
			s = e.store
			break
		}
	}
	for _, sg := range r.groups {
		if sg.store == s {
			return sg.g
		}
	}
	return nil
}

// Holder returns this replica's holder name in the leases of its
// LeaderJobs (Config.Elector's Holder, or [elector.DefaultHolder]), or ""
// for an app without LeaderJobs.
func (r *Registry) Holder() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.groups) == 0 {
		return ""
	}
	return r.groups[0].holder
}

// Members returns the replicas of the placement group of the LeaderJobs in
// [Registry.Store] (see [Config.Group]), as this replica last read them:
// sorted by holder, this one included (Self), each with the leases of the
// group it holds and since when it is a member. It is nil for an app
// without LeaderJobs.
func (r *Registry) Members() []placement.Member {
	if g := r.groupOf(""); g != nil {
		return g.Members()
	}
	return nil
}

// Waiting returns the holders of the members of lease's placement group
// that wait for it (every live member that is not draining, but the one
// that holds it), sorted; nil for a lease of no LeaderJob of the app.
func (r *Registry) Waiting(lease string) []string {
	r.mu.Lock()
	found := slices.ContainsFunc(r.jobs, func(e *registered) bool { return e.lease == lease })
	r.mu.Unlock()
	if !found {
		return nil
	}
	if g := r.groupOf(lease); g != nil {
		return g.Waiting(lease)
	}
	return nil
}

// Drain gives every lease this replica holds to the other members of its
// placement groups, at once, and returns when it holds none, or ctx's
// error. The replica then stays draining, taking no lease, until
// [Registry.Resume]; stopping the app drains first by itself.
//
// Drain moves leadership: never wire it to an unauthenticated port, such
// as a status page or metrics. Call it from a signal handler, a Unix
// socket created with mode 0600, or an endpoint behind the app's own
// authentication.
func (r *Registry) Drain(ctx context.Context) error {
	r.mu.Lock()
	groups := slices.Clone(r.groups)
	r.mu.Unlock()
	var errs []error
	for _, sg := range groups {
		if err := sg.g.Drain(ctx); err != nil {
			errs = append(errs, fmt.Errorf("fxmodule: drain: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Resume ends a [Registry.Drain]: this replica campaigns for its leases
// again, as the placement of its groups sees fit.
func (r *Registry) Resume() {
	r.mu.Lock()
	groups := slices.Clone(r.groups)
	r.mu.Unlock()
	for _, sg := range groups {
		sg.g.Resume()
	}
}
