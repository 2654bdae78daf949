package decorator

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// Status is what a decorated job tells of its leadership, for status pages
// and health checks. The job [Decorate] returns implements it, whatever its
// type J; reach it with [StatusOf]. The methods are safe for concurrent use,
// never wait for the job, and allocate nothing but an error.
type Status interface {
	// Leading reports whether this replica holds a term of the job's lease
	// that has not ended: from the moment the campaign is won (before
	// OnElected and the inner Start) until the term is lost, expires, or is
	// resigned or abandoned. The inner job may be starting or stopping
	// meanwhile.
	Leading() bool
	// Snapshot returns the job's leadership as of now.
	Snapshot() Snapshot
	// Healthy is a health check (the shape of controller-runtime's
	// healthz.Checker; the request is not used). It returns an error only
	// while an inner Start or Stop that overran its timeout has not
	// returned: its term was abandoned, and once the lease runs out another
	// replica leads while the job may still run here (fenced writes refuse
	// its writes). The timeouts are the grace past the trust window: the
	// stop timeout counts from the end of a term that ended on its own, or
	// from the call of Stop. Followers, and leaders whose job starts and
	// stops in time, are healthy. It also fails while the elector's own
	// Healthy method, if it has one, fails ([elector.LeaseElector.Healthy]:
	// a store that can no longer lead at all). It cannot see a job that goes on running after its
	// inner Stop returned (an error, or nil too early): the decorated job
	// takes the inner Stop at its word. The error names the job and the call
	// that overran, and the check recovers when the call returns.
	//
	// Use it for liveness, where a restart ends a job that will not stop.
	// Never gate readiness on leadership: every replica must stay ready to
	// take over, and a follower is as healthy as the leader.
	Healthy(*http.Request) error
}

// Snapshot is the leadership of a decorated job at one moment.
type Snapshot struct {
	Job   string // the type of the job given to Decorate, such as "*jobs.Prices"
	Lease string // the lease name: the elector's (if it has a Name method) or the current term's; "" if neither is known
	// Leading is what [Status.Leading] reports.
	Leading bool

	// The current term: set from the election until the inner job has
	// stopped (or failed to start) and the term is settled, when OnDemoted
	// runs; zero otherwise. Once the term has ended, Leading is false while
	// the job stops.
	Holder string    // this replica's holder name in the store
	Token  uint64    // the term's fencing token
	Since  time.Time // when this replica won the term, by its own clock
	// Renewed is the Written time of the term's lease as of its last
	// successful acquire or renew ([elector.Term.Lease]): the wall clock of
	// whoever wrote it (the database server of a SQL store, this host for
	// the memory store). For display only: compare it with no clock; how
	// long the term is trusted does not depend on it.
	Renewed time.Time
	// TrustRemaining is how long the term is still trusted (0 once it has
	// ended), if TrustKnown: if the term has a method
	// TrustRemaining() time.Duration. Otherwise both are zero.
	TrustRemaining time.Duration
	TrustKnown     bool

	// Overran is "inner Start" or "inner Stop" while that call has overrun
	// its timeout (WithStartTimeout, WithStopTimeout), its term was
	// abandoned, and it has not returned: Healthy fails meanwhile. It is ""
	// otherwise. OverranAt is when the timeout passed.
	Overran   string
	OverranAt time.Time
}

// StatusOf returns the [Status] of the decorated job j, or the first one
// found by following Unwrap() Job from j, so a job that wraps a decorated
// job and has that Unwrap method works too. ok is false if there is none.
func StatusOf(j any) (s Status, ok bool) {
	for j != nil {
		if s, ok := j.(Status); ok {
			return s, true
		}
		u, ok := j.(interface{ Unwrap() Job })
		if !ok {
			break
		}
		j = u.Unwrap()
	}
	return nil, false
}

// HealthCheck returns the Healthy method of the decorated job j (see
// [StatusOf] and [Status.Healthy]), for a liveness probe such as
// controller-runtime's
//
//	mgr.AddHealthzCheck("prices-leader", decorator.HealthCheck(job))
//
// If j is not, and does not wrap, a decorated job, the check always fails
// with an error naming j's type, so the mistake shows at the first probe.
func HealthCheck(j any) func(*http.Request) error {
	if s, ok := StatusOf(j); ok {
		return s.Healthy
	}
	err := fmt.Errorf("decorator: HealthCheck: %T is not a decorated job and wraps none", j)
	return func(*http.Request) error { return err }
}

// trustTeller is a term that tells how long it is still trusted: until the
// end of the trust window of its last successful acquire or renew, and 0
// once it has ended.
type trustTeller interface {
	TrustRemaining() time.Duration
}

// trustOf returns how long t is still trusted, if it tells.
func trustOf(t elector.Term) (time.Duration, bool) {
	if tt, ok := t.(trustTeller); ok {
		return tt.TrustRemaining(), true
	}
	return 0, false
}

// status is the part of a decorated job that its Status methods read. The
// gate sets the term; watchdogs set the overrun.
type status struct {
	mu        sync.Mutex
	term      elector.Term // from elected until demoted; nil otherwise
	since     time.Time    // when term was won
	overran   string       // the inner call that overran; "" if none
	overranAt time.Time
	timeout   time.Duration // the timeout it overran
}

// setTerm records the current term (nil once it is settled).
func (s *status) setTerm(t elector.Term) {
	var since time.Time
	if t != nil {
		since = time.Now()
	}
	s.mu.Lock()
	s.term, s.since = t, since
	s.mu.Unlock()
}

// setOverran records that the inner call what has overrun timeout.
func (s *status) setOverran(what string, timeout time.Duration) {
	s.mu.Lock()
	s.overran, s.overranAt, s.timeout = what, time.Now(), timeout
	s.mu.Unlock()
}

// clearOverran records that the call that overran has returned.
func (s *status) clearOverran() {
	s.mu.Lock()
	s.overran = ""
	s.mu.Unlock()
}

// Leading implements [Status].
func (d *decorated) Leading() bool {
	d.status.mu.Lock()
	t := d.status.term
	d.status.mu.Unlock()
	return t != nil && !isClosed(t.Done())
}

// Snapshot implements [Status].
func (d *decorated) Snapshot() Snapshot {
	s := &d.status
	s.mu.Lock()
	t, since, overran, at := s.term, s.since, s.overran, s.overranAt
	s.mu.Unlock()
	snap := Snapshot{Job: d.jobName, Lease: d.leaseName(), Overran: overran}
	if overran != "" {
		snap.OverranAt = at
	}
	if t == nil {
		return snap
	}
	l := t.Lease()
	if snap.Lease == "" {
		snap.Lease = l.Name
	}
	snap.Leading = !isClosed(t.Done())
	snap.Holder, snap.Token, snap.Since, snap.Renewed = l.Holder, t.Token(), since, l.Written
	snap.TrustRemaining, snap.TrustKnown = trustOf(t)
	return snap
}

// Healthy implements [Status].
func (d *decorated) Healthy(req *http.Request) error {
	s := &d.status
	s.mu.Lock()
	overran, at, timeout := s.overran, s.overranAt, s.timeout
	s.mu.Unlock()
	if overran == "" {
		if h, ok := d.elector.(interface{ Healthy(*http.Request) error }); ok {
			if err := h.Healthy(req); err != nil {
				return fmt.Errorf("decorator: %s cannot lead: %w", d, err)
			}
		}
		return nil
	}
	return fmt.Errorf("decorator: %s: %s overran its timeout of %v by %v and has not returned; its term was abandoned, so the job may run while another replica leads",
		d, overran, timeout, time.Since(at).Round(time.Millisecond))
}

// leaseName returns the elector's lease name, if it has a Name method.
func (d *decorated) leaseName() string {
	if n, ok := d.elector.(interface{ Name() string }); ok {
		return n.Name()
	}
	return ""
}

// observe completes ev with term's lease, holder and token and hands it to
// the observer, if there is one.
func (d *decorated) observe(term elector.Term, ev elector.Event) {
	if d.observer == nil {
		return
	}
	l := term.Lease()
	ev.Lease, ev.Holder, ev.Token = l.Name, l.Holder, term.Token()
	d.observer.Observe(ev)
}

// callBegin returns time.Now for observeCall, or the zero Time if there is
// no observer (observeCall reports nothing then), which costs no clock
// reading.
func (d *decorated) callBegin() time.Time {
	if d.observer == nil {
		return time.Time{}
	}
	return time.Now()
}

// observeCall reports an inner Start or Stop (kind) that began at begin (a
// callBegin) and returned err.
func (d *decorated) observeCall(kind elector.EventKind, term elector.Term, begin time.Time, err error) {
	if d.observer == nil {
		return
	}
	r := elector.ResultOK
	if err != nil {
		r = elector.ResultError
	}
	d.observe(term, elector.Event{Kind: kind, Result: r, Duration: time.Since(begin), Err: err})
}
