// Package statuspage serves a status page of the leases and leader jobs of
// an app, and the same as JSON, for any app to mount:
//
//	mux.Handle("/leaders/", statuspage.Handler(reg)) // reg: the *fxmodule.Registry
//
// The page, at the mount point, shows every lease in the store with its
// holder, token, TTL, last renewal and expiry, and the candidates waiting
// for it; the members of the app's placement group, with the leases each
// holds; the handoffs of every lease, whoever made them; and this
// instance's jobs with their term, trust, health and last run. It
// refreshes itself every second, without reload, from leases (next to the
// page: /leaders/leases above), the JSON.
//
// # How it works
//
// Each request of the JSON reads every lease of the store: with List if
// the source or its store has one ([Lister]), otherwise with
// [elector.BulkReader] or Get for the leases of the source's jobs. The
// handler compares each read with the one before it and records a handoff
// when a lease's token changes or the lease is freed, so it sees the
// handoffs of every replica, at the resolution of its readers (the page
// reads every second), and none while nothing reads. Reads are ordered as
// they began: one that returns after a later one does not count.
package statuspage

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leaderaware/leaderaware/decorator"
	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/jobs"
)

// Source is what the page shows: the app's leader jobs and their store.
// *fxmodule.Registry is one.
type Source interface {
	Jobs() []decorator.Snapshot
	Store() elector.Store
}

// Lister is a Source, or a Store, that lists every lease it holds, in any
// order; a free lease has only its Name set (as [elector.BulkReader]
// reports one).
type Lister interface {
	List(ctx context.Context) ([]elector.Lease, error)
}

// Handler returns the read-only handler of the page of src: the page at
// any path that ends in "/", and its JSON at any path that ends in
// "/leases"; only GET and HEAD (405 otherwise). The leases are listed with
// [Lister] if src or its store is one, otherwise only those of src's jobs.
// A src with the method Holder() string names this instance, and so its
// waiting candidates; with the method Job(lease string) decorator.Job, as
// *fxmodule.Registry has, the page shows each job's health and its last run
// (from a LastRun method of the inner job, as jobs.Every and jobs.Run have).
// A src with the methods Members() []placement.Member and
// Waiting(lease string) []string, as *fxmodule.Registry has, shows the
// members of its placement group and, for each lease, every member that
// waits for it, rather than only this instance's jobs; the membership
// seats of the group are then not listed among the leases. The page never
// changes anything: it has no drain button.
func Handler(src Source) http.Handler {
	return &handler{src: src, seen: map[string]elector.Lease{}, held: map[string]elector.Lease{}}
}

// readTimeout bounds the store reads of one request.
const readTimeout = 5 * time.Second

// keptHandoffs is how many handoffs the handler keeps.
const keptHandoffs = 50

// csp lets the page run its own script, fetch from its own origin and
// nothing else.
const csp = "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

var (
	//go:embed page.html
	pageHTML []byte
	//go:embed page.js
	pageJS []byte
)

type handler struct {
	src Source

	mu       sync.Mutex
	began    uint64                   // reads begun
	applied  uint64                   // the read whose leases seen holds
	readAt   time.Time                // when it returned
	seen     map[string]elector.Lease // each lease as last read
	held     map[string]elector.Lease // each lease as last read held
	handoffs []Handoff                // newest first, at most keptHandoffs
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "statuspage: read-only: "+r.Method+" is not allowed", http.StatusMethodNotAllowed)
		return
	}
	hd := w.Header()
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	switch p := r.URL.Path; {
	case p == "" || strings.HasSuffix(p, "/"):
		hd.Set("Content-Type", "text/html; charset=utf-8")
		hd.Set("Content-Security-Policy", csp)
		_, _ = w.Write(pageHTML)
	case strings.HasSuffix(p, "/page.js") || p == "page.js":
		hd.Set("Content-Type", "text/javascript; charset=utf-8")
		_, _ = w.Write(pageJS)
	case strings.HasSuffix(p, "/leases") || p == "leases":
		st := h.status(r)
		code := http.StatusOK
		if st.Error != "" {
			code = http.StatusServiceUnavailable
		}
		hd.Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(st)
	default:
		http.NotFound(w, r)
	}
}

// Status is the JSON of the page: snake_case keys, durations as a string
// and in seconds, times in RFC 3339 and left out when unknown, tokens and
// versions as strings (they need not fit a JavaScript number).
type Status struct {
	Now    time.Time `json:"now"`              // this instance's clock
	Holder string    `json:"holder,omitempty"` // this instance, if the source names it
	// Error says why the leases could not be read (the response is then a
	// 503, with the jobs and the handoffs seen before).
	Error  string  `json:"error,omitempty"`
	Leases []Lease `json:"leases"`
	// Members are the replicas of the source's placement group, sorted by
	// holder, if the source has one.
	Members  []Member  `json:"members,omitempty"`
	Jobs     []Job     `json:"jobs"`
	Handoffs []Handoff `json:"handoffs"` // newest first
}

// Lease is a lease in the store. Renewed, Expires and Expired compare the
// writer's clock with this instance's, for display only.
type Lease struct {
	Name       string     `json:"name"`
	Free       bool       `json:"free"`
	Holder     string     `json:"holder,omitempty"`
	Token      uint64     `json:"token,omitempty,string"`
	Version    uint64     `json:"version,omitempty,string"`
	TTL        string     `json:"ttl,omitempty"`
	TTLSeconds float64    `json:"ttl_seconds,omitempty"`
	Renewed    *time.Time `json:"renewed,omitempty"`
	Expires    *time.Time `json:"expires,omitempty"`
	Expired    bool       `json:"expired,omitempty"`
	// Waiting are the candidates that wait for the lease: the members of
	// the source's placement group that do, or, without one, this
	// instance's jobs of the lease that do not lead it.
	Waiting []Candidate `json:"waiting,omitempty"`
}

// Candidate is a candidate waiting for a lease: a member of the group
// (Holder), and, if it is this instance, its job (Job).
type Candidate struct {
	Job    string `json:"job,omitempty"`
	Holder string `json:"holder,omitempty"`
}

// Member is a replica of the source's placement group. Since is by the
// member's own clock, for display only.
type Member struct {
	Group    string     `json:"group,omitempty"` // where several groups are listed (leaderd status)
	Holder   string     `json:"holder"`
	Since    *time.Time `json:"since,omitempty"`
	Leases   []string   `json:"leases"` // the group's leases it holds, sorted
	Self     bool       `json:"self,omitempty"`
	Draining bool       `json:"draining,omitempty"`
}

// Job is one of this instance's leader jobs.
type Job struct {
	Lease   string `json:"lease"`
	Job     string `json:"job"`
	Leading bool   `json:"leading"`
	// The current term, while there is one.
	Holder                string     `json:"holder,omitempty"`
	Token                 uint64     `json:"token,omitempty,string"`
	Since                 *time.Time `json:"since,omitempty"`
	TrustRemaining        string     `json:"trust_remaining,omitempty"`
	TrustRemainingSeconds *float64   `json:"trust_remaining_seconds,omitempty"`
	Healthy               bool       `json:"healthy"`
	Health                string     `json:"health,omitempty"` // why it is not healthy
	LastRun               *Run       `json:"last_run,omitempty"`
}

// Run is what a job last did.
type Run struct {
	Started         *time.Time `json:"started,omitempty"`
	Ended           *time.Time `json:"ended,omitempty"`
	Duration        string     `json:"duration,omitempty"`
	DurationSeconds *float64   `json:"duration_seconds,omitempty"`
	Error           string     `json:"error,omitempty"` // the last error, kept until the next one
	ErrorAt         *time.Time `json:"error_at,omitempty"`
}

// Handoff is a change of a lease's term that the handler saw between two
// reads: a new token (From is the last holder seen, if any), or the lease
// freed (Released). It happened after the read before (After) and before
// At, by this instance's clock.
type Handoff struct {
	At        time.Time `json:"at"`    // when the read that saw it returned
	After     time.Time `json:"after"` // when the read before it returned
	Lease     string    `json:"lease"`
	From      string    `json:"from,omitempty"`
	FromToken uint64    `json:"from_token,omitempty,string"`
	To        string    `json:"to,omitempty"`
	ToToken   uint64    `json:"to_token,omitempty,string"`
	Released  bool      `json:"released,omitempty"`
}

// status reads the store and returns the page's JSON.
func (h *handler) status(r *http.Request) Status {
	if h.src == nil {
		return Status{Now: time.Now(), Error: "statuspage: Handler(nil): the page needs a Source, such as the app's *fxmodule.Registry",
			Leases: []Lease{}, Jobs: []Job{}, Handoffs: []Handoff{}}
	}
	snaps := h.src.Jobs()
	h.mu.Lock()
	h.began++
	read := h.began
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	leases, err := h.read(ctx, snaps)
	cancel()
	now := time.Now()
	st := Status{Now: now, Holder: holderOf(h.src)}
	leases = withoutSeats(leases)
	if err != nil {
		st.Error = err.Error()
	} else {
		h.apply(read, leases, now)
	}
	grp, _ := h.src.(group)
	if grp != nil {
		st.Members = membersJSON(grp.Members())
	}
	st.Leases = leasesJSON(mergeJobs(leases, snaps), snaps, st.Holder, grp, now)
	st.Jobs = h.jobsJSON(r, snaps)
	h.mu.Lock()
	st.Handoffs = slices.Clone(h.handoffs)
	h.mu.Unlock()
	if st.Handoffs == nil {
		st.Handoffs = []Handoff{}
	}
	return st
}

// read returns every lease of the store, by name.
func (h *handler) read(ctx context.Context, snaps []decorator.Snapshot) ([]elector.Lease, error) {
	ls, err := h.list(ctx, snaps)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(ls, func(a, b elector.Lease) int { return cmp.Compare(a.Name, b.Name) })
	return ls, nil
}

func (h *handler) list(ctx context.Context, snaps []decorator.Snapshot) ([]elector.Lease, error) {
	if l, ok := h.src.(Lister); ok {
		return l.List(ctx)
	}
	s := h.src.Store()
	if s == nil {
		return nil, errors.New("statuspage: the source has no store (an app without leader jobs)")
	}
	if l, ok := s.(Lister); ok {
		return l.List(ctx)
	}
	names := jobLeases(snaps)
	if b, ok := s.(elector.BulkReader); ok {
		return b.GetMany(ctx, names)
	}
	out := make([]elector.Lease, 0, len(names))
	for _, name := range names {
		l, err := s.Get(ctx, name)
		switch {
		case errors.Is(err, elector.ErrNoLease):
			l = elector.Lease{Name: name}
		case err != nil:
			return nil, fmt.Errorf("statuspage: read lease %q: %w", name, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// jobLeases returns the lease names of snaps, sorted, once each.
func jobLeases(snaps []decorator.Snapshot) []string {
	names := make([]string, 0, len(snaps))
	for _, s := range snaps {
		if s.Lease != "" {
			names = append(names, s.Lease)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// mergeJobs returns leases, by name, with a free lease for each lease of
// snaps that it lacks (a Lister lists only leases once taken).
func mergeJobs(leases []elector.Lease, snaps []decorator.Snapshot) []elector.Lease {
	out := slices.Clone(leases)
	for _, name := range jobLeases(snaps) {
		if !slices.ContainsFunc(leases, func(l elector.Lease) bool { return l.Name == name }) {
			out = append(out, elector.Lease{Name: name})
		}
	}
	slices.SortFunc(out, func(a, b elector.Lease) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// apply records the handoffs between the leases last seen and those that
// read number read returned at now, unless a later read was applied.
func (h *handler) apply(read uint64, leases []elector.Lease, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if read < h.applied {
		return
	}
	h.applied = read
	after := h.readAt
	h.readAt = now
	for _, l := range leases {
		prev, known := h.seen[l.Name]
		h.seen[l.Name] = l
		last, wasHeld := h.held[l.Name]
		free := l.Holder == ""
		if !free {
			h.held[l.Name] = l
		}
		switch {
		case !known:
		case free && prev.Holder != "":
			h.record(Handoff{At: now, After: after, Lease: l.Name, From: prev.Holder, FromToken: prev.Token, Released: true})
		case !free && (!wasHeld || last.Token != l.Token):
			h.record(Handoff{At: now, After: after, Lease: l.Name, From: last.Holder, FromToken: last.Token, To: l.Holder, ToToken: l.Token})
		}
	}
}

func (h *handler) record(ho Handoff) {
	h.handoffs = slices.Insert(h.handoffs, 0, ho)
	h.handoffs = h.handoffs[:min(len(h.handoffs), keptHandoffs)]
}

// holderOf returns the name of this instance, if src has a Holder method.
func holderOf(src Source) string {
	if h, ok := src.(interface{ Holder() string }); ok {
		return h.Holder()
	}
	return ""
}

// Leases returns leases, read at now, as the page's JSON lists them (a
// lease without Holder as free), without Waiting, which only a Source
// knows.
func Leases(leases []elector.Lease, now time.Time) []Lease {
	out := make([]Lease, len(leases))
	for i, l := range leases {
		j := Lease{Name: l.Name, Free: l.Holder == ""}
		if !j.Free {
			j.Holder, j.Token, j.Version = l.Holder, l.Token, l.Version
			j.TTL, j.TTLSeconds = l.TTL.String(), l.TTL.Seconds()
			if !l.Written.IsZero() {
				renewed, expires := l.Written, l.Expires()
				j.Renewed, j.Expires, j.Expired = &renewed, &expires, expires.Before(now)
			}
		}
		out[i] = j
	}
	return out
}

// leasesJSON returns leases as JSON, with the candidates that wait for
// each: the members of grp that do, if grp is not nil, else the jobs of
// snaps that do not lead it, this instance's (holder).
func leasesJSON(leases []elector.Lease, snaps []decorator.Snapshot, holder string, grp group, now time.Time) []Lease {
	out := Leases(leases, now)
	for i := range out {
		for _, s := range snaps {
			if s.Lease != out[i].Name {
				continue
			}
			if grp != nil {
				out[i].Waiting = waitingJSON(grp.Waiting(s.Lease), s.Job, holder)
				break
			}
			if !s.Leading {
				out[i].Waiting = append(out[i].Waiting, Candidate{Job: s.Job, Holder: holder})
			}
		}
	}
	return out
}

// jobsJSON returns snaps as JSON, by lease name.
func (h *handler) jobsJSON(r *http.Request, snaps []decorator.Snapshot) []Job {
	jobOf, _ := h.src.(interface {
		Job(lease string) decorator.Job
	})
	out := make([]Job, len(snaps))
	for i, s := range snaps {
		j := Job{Lease: s.Lease, Job: s.Job, Leading: s.Leading, Holder: s.Holder, Token: s.Token, Healthy: true}
		if !s.Since.IsZero() {
			j.Since = &s.Since
		}
		if s.TrustKnown && s.Token != 0 {
			trust := s.TrustRemaining.Seconds()
			j.TrustRemaining, j.TrustRemainingSeconds = s.TrustRemaining.Round(time.Millisecond).String(), &trust
		}
		var job decorator.Job
		if jobOf != nil {
			job = jobOf.Job(s.Lease)
		}
		if st, ok := decorator.StatusOf(job); ok {
			if err := st.Healthy(r); err != nil {
				j.Healthy, j.Health = false, err.Error()
			}
		} else if s.Overran != "" {
			j.Healthy, j.Health = false, s.Overran+" overran its timeout"
		}
		if run, ok := lastRunOf(job); ok {
			j.LastRun = runJSON(run)
		}
		out[i] = j
	}
	slices.SortStableFunc(out, func(a, b Job) int { return cmp.Compare(a.Lease, b.Lease) })
	return out
}

// lastRunOf returns the LastRun of j or of the first job found by following
// Unwrap() Job from j.
func lastRunOf(j decorator.Job) (jobs.RunReport, bool) {
	for j != nil {
		if lr, ok := j.(interface{ LastRun() jobs.RunReport }); ok {
			return lr.LastRun(), true
		}
		u, ok := j.(interface{ Unwrap() decorator.Job })
		if !ok {
			break
		}
		j = u.Unwrap()
	}
	return jobs.RunReport{}, false
}

func runJSON(r jobs.RunReport) *Run {
	out := new(Run)
	if !r.Started.IsZero() {
		out.Started = &r.Started
	}
	if !r.Ended.IsZero() {
		out.Ended = &r.Ended
		d := r.Ended.Sub(r.Started)
		secs := d.Seconds()
		out.Duration, out.DurationSeconds = d.String(), &secs
	}
	if r.Err != nil {
		out.Error, out.ErrorAt = r.Err.Error(), &r.ErrAt
	}
	return out
}
