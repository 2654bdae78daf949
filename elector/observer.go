package elector

import (
	"context"
	"errors"
	"time"
)

// Observer receives what electors and decorated jobs do, for metrics and
// logs. Observe is called synchronously, on the goroutine where the event
// happens (a campaign, a term's renewals, a decorated job's gate), so it
// must return quickly and never block: a slow Observer delays renewals.
// Set one per elector ([Config.Observer]) or per decorated job; there is no
// global one, and none costs nothing.
type Observer interface {
	Observe(Event)
}

// Event is one thing an elector, a term or a decorated job did. Which
// fields are set depends on Kind.
type Event struct {
	Kind  EventKind
	Lease string // the lease name
	// Holder is this candidate. It is unbounded (host-pid-random by
	// default): log it, never use it as a metric label.
	Holder   string
	Token    uint64        // the term's token, once there is a term
	Op       Op            // EventStoreOp: which call
	Result   Result        // EventStoreOp, EventCampaign, EventFenced, EventJobStart, EventJobStop
	Cause    Cause         // EventDemoted
	Duration time.Duration // EventStoreOp, EventJobStart, EventJobStop: how long the call took
	// Trust is, for a won EventCampaign and a successful renewal
	// (EventStoreOp), how long the term is now trusted for.
	Trust time.Duration
	Err   error // the error, if Result is ResultError or Cause is not CauseResigned
}

// EventKind says what an [Event] reports.
type EventKind uint8

// The kinds of [Event].
const (
	EventStoreOp  EventKind = iota + 1 // a store call an elector or term made
	EventCampaign                      // a campaign attempt ended: won, held or failed
	EventElected                       // a term began
	EventDemoted                       // a term ended; Cause says why
	EventFenced                        // a fenced write committed or was refused
	EventJobStart                      // the inner job's Start returned
	EventJobStop                       // the inner job's Stop returned
)

var kindNames = [...]string{"", "store_operation", "campaign", "elected", "demoted", "fenced_write", "job_start", "job_stop"}

func (k EventKind) String() string { return name(kindNames[:], k) }

// Op is a [Store] call.
type Op uint8

// The store calls.
const (
	OpAcquire Op = iota + 1
	OpRenew
	OpRelease
	OpGet
)

var opNames = [...]string{"", "acquire", "renew", "release", "get"}

func (o Op) String() string { return name(opNames[:], o) }

// Result is how a call ended.
type Result uint8

// The results. For a fenced write, ResultOK is committed and ResultLost
// refused.
const (
	ResultOK Result = iota + 1
	ResultHeld
	ResultLost
	ResultError
)

var resultNames = [...]string{"", "ok", "held", "lost", "error"}

func (r Result) String() string { return name(resultNames[:], r) }

// ResultOf classifies err: nil is ResultOK, [ErrHeld] ResultHeld,
// [ErrLeaseLost] ResultLost, anything else ResultError.
func ResultOf(err error) Result {
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, ErrHeld):
		return ResultHeld
	case errors.Is(err, ErrLeaseLost):
		return ResultLost
	default:
		return ResultError
	}
}

// Cause is why a term ended.
type Cause uint8

// The causes of a demotion.
const (
	CauseResigned    Cause = iota + 1 // Resign: the job stopped and freed the lease
	CauseLost                         // another candidate took the lease over
	CauseExpired                      // renewals failed until the trust window closed
	CauseStartFailed                  // the inner job failed to start
	CauseStoreError                   // the store failed in a way that ended the term
	CauseAbandoned                    // the term was left to run out (the job may still run)
	CauseHandedOff                    // the job stopped and freed the lease for another candidate, as its Placer asked
)

var causeNames = [...]string{"", "resigned", "lost", "expired", "start_failed", "store_error", "abandoned", "handed_off"}

func (c Cause) String() string { return name(causeNames[:], c) }

// CauseOf classifies the error a term ended with (see [Term.Err]).
func CauseOf(err error) Cause {
	switch {
	case errors.Is(err, ErrResigned):
		return CauseResigned
	case errors.Is(err, ErrAbandoned):
		return CauseAbandoned
	case errors.Is(err, ErrLeaseLost):
		return CauseLost
	case errors.Is(err, ErrLeaseExpired):
		return CauseExpired
	default:
		return CauseStoreError
	}
}

func name[T ~uint8](names []string, v T) string {
	if int(v) < len(names) && v != 0 {
		return names[v]
	}
	return "unknown"
}

type observerKey struct{}

// ContextWithObserver returns a copy of ctx that carries o, so that code
// far from the elector (a store's fenced write) can report to it with
// [ObserveFenced]. The decorator package puts the job's observer in the
// context it gives the inner job.
func ContextWithObserver(ctx context.Context, o Observer) context.Context {
	if o == nil {
		return ctx
	}
	return context.WithValue(ctx, observerKey{}, o)
}

// ObserveFenced reports a fenced write of the term in ctx to the observer
// in ctx, if both are there: committed if err is nil, refused if err
// matches [ErrLeaseLost]; other errors are not reported. Stores call it.
func ObserveFenced(ctx context.Context, err error) {
	o, ok := ctx.Value(observerKey{}).(Observer)
	if !ok {
		return
	}
	r := ResultOf(err)
	if r != ResultOK && r != ResultLost {
		return
	}
	t, ok := TermFromContext(ctx)
	if !ok {
		return
	}
	l := t.Lease()
	o.Observe(Event{Kind: EventFenced, Lease: l.Name, Holder: l.Holder, Token: l.Token, Result: r})
}
