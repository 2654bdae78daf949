package fxmodule

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
)

// Registry lists the [LeaderJob]s of an app, for status pages and health
// checks. [Module] provides it as *Registry; ask for it in a constructor or
// an fx.Invoke:
//
//	fx.Invoke(func(mux *http.ServeMux, reg *fxmodule.Registry) {
//		probe := func(check func(*http.Request) error) http.HandlerFunc {
//			return func(w http.ResponseWriter, r *http.Request) {
//				if err := check(r); err != nil {
//					http.Error(w, err.Error(), http.StatusServiceUnavailable)
//				}
//			}
//		}
//		mux.HandleFunc("GET /livez", probe(reg.Healthy))
//		mux.HandleFunc("GET /readyz", probe(reg.Ready))
//	})
//
// Every LeaderJob of the app adds its decorated job when it is built, which
// is during fx.New, so the list is complete once fx.New has returned. Its
// methods are safe for concurrent use and never wait for a job.
type Registry struct {
	mu     sync.Mutex
	jobs   []*registered // sorted by lease name
	store  elector.Store // the store of the first job added
	groups []*storeGroup // one per store, in the order of their first jobs
	phase  phase
}

// registered is one LeaderJob in a Registry.
type registered struct {
	lease   string
	job     decorator.Job // the decorated job
	status  decorator.Status
	store   elector.Store
	started bool // its OnStart hook has started it, and its OnStop has not begun; guarded by Registry.mu
}

// phase is where the app is in its lifecycle, as far as the Registry sees it.
type phase uint8

const (
	phaseNew      phase = iota // not started yet
	phaseStarted               // the Registry's OnStart hook has run
	phaseStopping              // an OnStop hook of the Registry or of a LeaderJob has begun
)

// newRegistry returns an empty Registry whose lifecycle hooks track the
// app's start and stop for [Registry.Ready].
func newRegistry(lc fx.Lifecycle) *Registry {
	r := new(Registry)
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error { r.setPhase(phaseStarted); return nil },
		OnStop:  func(context.Context) error { r.setPhase(phaseStopping); return nil },
	})
	return r
}

func (r *Registry) setPhase(p phase) {
	r.mu.Lock()
	r.phase = p
	r.mu.Unlock()
}

// add records job, decorated under the lease name in store, and returns
// its entry. job must be a decorated job.
func (r *Registry) add(lease string, job decorator.Job, store elector.Store) (*registered, error) {
	s, ok := decorator.StatusOf(job)
	if !ok {
		return nil, fmt.Errorf("fxmodule: job %q: %T is not a decorated job", lease, job)
	}
	e := &registered{lease: lease, job: job, status: s, store: store}
	r.mu.Lock()
	defer r.mu.Unlock()
	i, _ := slices.BinarySearchFunc(r.jobs, lease, func(e *registered, lease string) int { return cmp.Compare(e.lease, lease) })
	r.jobs = slices.Insert(r.jobs, i, e)
	if r.store == nil {
		r.store = store
	}
	return e, nil
}

// setStarted records whether the lifecycle hooks of e have started it
// (true) or begun to stop it (false, and the app is stopping).
func (r *Registry) setStarted(e *registered, started bool) {
	r.mu.Lock()
	e.started = started
	if !started {
		r.phase = phaseStopping
	}
	r.mu.Unlock()
}

// Jobs returns a snapshot of every LeaderJob of the app, sorted by lease
// name: what this replica leads now (Snapshot.Leading) and, for each term
// it holds, its holder, token and trust. It is empty for an app without
// LeaderJobs.
func (r *Registry) Jobs() []decorator.Snapshot {
	r.mu.Lock()
	jobs := slices.Clone(r.jobs)
	r.mu.Unlock()
	snaps := make([]decorator.Snapshot, len(jobs))
	for i, e := range jobs {
		snaps[i] = e.status.Snapshot()
		if snaps[i].Lease == "" {
			snaps[i].Lease = e.lease
		}
	}
	return snaps
}

// Job returns the decorated job of the LeaderJob of lease, or nil if the
// app has none, for a status page: its Unwrap() Job methods lead to the
// inner job.
func (r *Registry) Job(lease string) decorator.Job {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.jobs {
		if e.lease == lease {
			return e.job
		}
	}
	return nil
}

// Leader returns the current lease of the lease name, whoever holds it (this
// replica or another), as the store's Get reads it now: an error matching
// [elector.ErrNoLease] if the lease is free (never taken, or released). Any
// lease name in the store works, not only those of this app's LeaderJobs.
// The lease of a holder that died is returned until another candidate takes
// it over: only a candidate's watch decides that it ran out. Leader asks
// the store of the LeaderJob of that name, or for other names, [Registry.Store];
// it returns an error if the app has no LeaderJob (and so no store).
func (r *Registry) Leader(ctx context.Context, lease string) (elector.Lease, error) {
	r.mu.Lock()
	s := r.store
	for _, e := range r.jobs {
		if e.lease == lease {
			s = e.store
			break
		}
	}
	r.mu.Unlock()
	if s == nil {
		return elector.Lease{}, fmt.Errorf("fxmodule: leader of lease %q: the app has no LeaderJob, so no lease store", lease)
	}
	return s.Get(ctx, lease)
}

// Healthy is the liveness check of the whole app, in the shape of
// controller-runtime's healthz.Checker (the request is not used): nil
// unless the health check of some LeaderJob fails ([decorator.Status]
// Healthy: an inner Start or Stop that overran its timeout has not
// returned, so the job may run here while another replica leads), and then
// the errors of those jobs, joined, each naming its job and lease. A
// follower is healthy, and so is a leader whose job starts and stops in
// time.
//
// Use it for liveness, where a restart ends a job that will not stop. Never
// use it, or leadership, for readiness: see [Registry.Ready].
func (r *Registry) Healthy(req *http.Request) error {
	r.mu.Lock()
	jobs := slices.Clone(r.jobs)
	r.mu.Unlock()
	var errs []error
	for _, e := range jobs {
		if err := e.status.Healthy(req); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Ready is a readiness check that never depends on leadership: it returns
// nil once the app has started (the OnStart hooks of the Registry and of
// every LeaderJob have run, so every job campaigns), on the leader and on
// followers alike, and an error before that and once the app has begun to
// stop. The request is not used.
//
// Readiness must not wait for leadership: every replica has to stay ready
// to take over. A follower that reported itself not ready would be taken
// out of its Service and counted unavailable, and a rolling update would
// stall, since a new pod cannot lead while an old one holds the lease, and
// the old pods are not stopped until the new ones are ready. For the
// health of the leader, use [Registry.Healthy] as a liveness check.
func (r *Registry) Ready(*http.Request) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch r.phase {
	case phaseNew:
		return errors.New("fxmodule: not ready: the app has not started")
	case phaseStopping:
		return errors.New("fxmodule: not ready: the app is stopping")
	}
	for _, e := range r.jobs {
		if !e.started {
			return fmt.Errorf("fxmodule: not ready: the LeaderJob of lease %q has not started", e.lease)
		}
	}
	return nil
}

// Store returns the lease store the app's LeaderJobs campaign in, for a
// status page to list the leases; nil if the app has no LeaderJob. (If an
// fx.Replace in a module gives some LeaderJobs another store, such as
// [WithStore] in a module that holds only some of them, Store returns that
// of the first LeaderJob built, and [Registry.Leader] asks each job's lease
// of its own store.)
func (r *Registry) Store() elector.Store {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.store
}
