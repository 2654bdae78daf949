package electortest

// The Linearizable subtest: a few clients run random operations on one lease
// at once, the history of calls and returns is recorded, and porcupine
// checks that some order of the operations, each taking effect at one
// instant between its call and its return, follows the Store contract as
// leaseModel states it.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/leaderaware/leaderaware/elector"
)

const (
	linClients      = 5
	linOpsPerClient = 60                     // 300 operations: porcupine checks them in milliseconds
	linBudget       = 2 * time.Second        // no client starts an operation after this
	linOpTimeout    = 2 * time.Second        // the deadline of each operation
	linPause        = 200 * time.Microsecond // the longest pause before each operation
	linCheckTimeout = 10 * time.Second
)

func testLinearizable(t *testing.T, s elector.Store, name string) {
	if ok, viz := checkLinearizable(t, s, name); !ok {
		t.Errorf("concurrent operations on %q are not linearizable: no order of them, each taking effect "+
			"between its call and its return, keeps the Store contract; open %s to see the history and "+
			"the longest legal order", name, viz)
	}
}

// checkLinearizable runs the clients on s and checks their history. If it
// is not linearizable, it returns false and the path of porcupine's HTML
// visualization of it.
func checkLinearizable(t *testing.T, s elector.Store, name string) (ok bool, vizPath string) {
	t.Helper()
	history := runClients(s, name)
	t.Log(summarize(history))
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(leaseModel, history, linCheckTimeout)
	t.Logf("porcupine: %s in %v", res, time.Since(start).Round(time.Microsecond))
	switch res {
	case porcupine.Ok:
		return true, ""
	case porcupine.Unknown:
		t.Logf("porcupine could not decide within %v; the history is not judged", linCheckTimeout)
		return true, ""
	}
	f, err := os.CreateTemp("", "electortest-linearizability-*.html")
	if err != nil {
		return false, fmt.Sprintf("(no visualization: %v)", err)
	}
	vizPath = f.Name()
	f.Close()
	if err := porcupine.VisualizePath(leaseModel, info, vizPath); err != nil {
		return false, fmt.Sprintf("(no visualization: %v)", err)
	}
	return false, vizPath
}

// The operations of the history.
type opKind int

const (
	opAcquire opKind = iota
	opRenew
	opRelease
	opGet
)

// leaseInput is an operation as called.
type leaseInput struct {
	op     opKind
	holder string        // of TryAcquire
	ttl    time.Duration // of TryAcquire and Renew
	lease  elector.Lease // TryAcquire's observed lease, or the term to renew or release
}

type outcome int

const (
	succeeded outcome = iota // nil error
	refused                  // the contract's error: ErrHeld, ErrLeaseLost, ErrNoLease
	unknown                  // any other error: the operation may or may not have taken effect
)

// leaseOutput is what an operation returned.
type leaseOutput struct {
	outcome outcome
	lease   elector.Lease // the returned lease, or the HeldError's
	err     error         // of an unknown outcome, for the visualization
}

// runClients runs the clients at once and returns their history.
func runClients(s elector.Store, name string) []porcupine.Operation {
	var (
		start   time.Time
		begin   = make(chan struct{})
		nextID  atomic.Int64 // porcupine client ids after the first linClients
		wg      sync.WaitGroup
		history = make([][]porcupine.Operation, linClients)
	)
	nextID.Store(linClients)
	for i := range linClients {
		c := &client{s: s, name: name, holder: fmt.Sprintf("client-%d", i), id: i}
		wg.Go(func() {
			<-begin
			history[i] = c.run(start, &nextID)
		})
	}
	start = time.Now()
	close(begin)
	wg.Wait()
	return slices.Concat(history...)
}

// client is a candidate of the workload, with its own holder name.
type client struct {
	s      elector.Store
	name   string
	holder string
	id     int           // its porcupine client id
	seen   elector.Lease // the lease it last saw: in a HeldError, from Get or its own success
	term   elector.Lease // the term it last acquired or renewed, current or not
}

// run does linOpsPerClient operations, or fewer if linBudget after start
// passed, and returns them with their call and return times since start.
func (c *client) run(start time.Time, nextID *atomic.Int64) []porcupine.Operation {
	var ops []porcupine.Operation
	for range linOpsPerClient {
		if time.Since(start) > linBudget {
			break
		}
		// A pause lets the clients interleave even where each operation
		// takes microseconds.
		time.Sleep(rand.N(linPause))
		in := c.next()
		ctx, cancel := context.WithTimeout(context.Background(), linOpTimeout)
		call := time.Since(start)
		out := c.do(ctx, in)
		ret := time.Since(start)
		cancel()
		op := porcupine.Operation{ClientId: c.id, Input: in, Call: int64(call), Output: out, Return: int64(ret)}
		if out.outcome == unknown {
			// The operation may still take effect at any later time: it
			// returns after everything (porcupine's way for operations
			// that never returned), and the client goes on under a new
			// id, as Jepsen's clients do.
			op.Return = math.MaxInt64
			c.id = int(nextID.Add(1) - 1)
		}
		ops = append(ops, op)
		c.learn(in, out)
	}
	return ops
}

// The odds, in percent, that a client picks TryAcquire, Renew, Release and
// Get (in the order of opKind): a client that holds the lease, as far as it
// knows, mostly renews it; the others mostly try to acquire it.
var (
	holderOdds    = [4]int{15, 65, 10, 10}
	candidateOdds = [4]int{50, 15, 10, 25}
)

// next picks an operation. TryAcquire mostly observes the lease the client
// last saw, so that takeovers happen; Renew and Release are of its last
// term, whether or not it still holds it.
func (c *client) next() leaseInput {
	odds := candidateOdds
	if c.term.Token != 0 && c.term.Is(c.seen) {
		odds = holderOdds
	}
	op := opAcquire
	for r := rand.IntN(100); r >= odds[op]; op++ {
		r -= odds[op]
	}
	if c.term.Token == 0 && (op == opRenew || op == opRelease) {
		op = opAcquire // no term yet
	}
	ttl := time.Duration(1+rand.IntN(2)) * time.Minute // whole minutes: no store rounds them
	switch op {
	case opAcquire:
		observed := c.seen
		if rand.IntN(4) == 0 {
			observed = elector.Lease{}
		}
		return leaseInput{op: opAcquire, holder: c.holder, ttl: ttl, lease: observed}
	case opRenew:
		return leaseInput{op: opRenew, ttl: ttl, lease: c.term}
	case opRelease:
		return leaseInput{op: opRelease, lease: c.term}
	}
	return leaseInput{op: opGet}
}

// do calls the store and sorts what it returned by the contract.
func (c *client) do(ctx context.Context, in leaseInput) leaseOutput {
	var (
		l    elector.Lease
		err  error
		held *elector.HeldError
	)
	switch in.op {
	case opAcquire:
		l, err = c.s.TryAcquire(ctx, c.name, in.holder, in.ttl, in.lease)
	case opRenew:
		l, err = c.s.Renew(ctx, in.lease, in.ttl)
	case opRelease:
		err = c.s.Release(ctx, in.lease)
	case opGet:
		l, err = c.s.Get(ctx, c.name)
	}
	switch {
	case err == nil:
		return leaseOutput{outcome: succeeded, lease: l}
	case in.op == opAcquire && errors.As(err, &held):
		return leaseOutput{outcome: refused, lease: held.Lease}
	case in.op == opRenew && errors.Is(err, elector.ErrLeaseLost),
		in.op == opGet && errors.Is(err, elector.ErrNoLease):
		return leaseOutput{outcome: refused}
	}
	return leaseOutput{outcome: unknown, err: err}
}

// learn remembers the lease an operation returned.
func (c *client) learn(in leaseInput, out leaseOutput) {
	if out.outcome == unknown || out.lease.Token == 0 {
		return
	}
	c.seen = out.lease
	if out.outcome == succeeded && (in.op == opAcquire || in.op == opRenew) {
		c.term = out.lease
	}
}

// summarize counts the outcomes of each kind of operation, to show what the
// workload did.
func summarize(history []porcupine.Operation) string {
	var n [4][3]int
	observing := 0 // acquisitions with an observed lease: takeovers, or a lease freed since
	for _, op := range history {
		in, out := op.Input.(leaseInput), op.Output.(leaseOutput)
		n[in.op][out.outcome]++
		if in.op == opAcquire && out.outcome == succeeded && in.lease.Token != 0 {
			observing++
		}
	}
	return fmt.Sprintf("%d operations: TryAcquire %d won (%d observing a lease), %d held; "+
		"Renew %d renewed, %d lost; Release %d; Get %d held, %d free; %d unknown outcomes",
		len(history), n[opAcquire][succeeded], observing, n[opAcquire][refused],
		n[opRenew][succeeded], n[opRenew][refused], n[opRelease][succeeded], n[opGet][succeeded], n[opGet][refused],
		n[opAcquire][unknown]+n[opRenew][unknown]+n[opRelease][unknown]+n[opGet][unknown])
}

// leaseState is the model's state of the lease. Its Token and Version are
// the lease's own while it is held and not Vague; otherwise they are lower
// bounds, and the model accepts any larger values the store returns, as
// stores may floor tokens at a clock.
type leaseState struct {
	Free    bool // never acquired, or released
	Holder  string
	Token   uint64
	Version uint64
	TTL     time.Duration
	// Vague: an operation of unknown outcome may have written the lease
	// (the model follows both branches); its Token and Version are not
	// known until an operation returns the lease.
	Vague bool
}

// heldAs returns the state in which l is the current lease.
func heldAs(l elector.Lease) leaseState {
	return leaseState{Holder: l.Holder, Token: l.Token, Version: l.Version, TTL: l.TTL}
}

// is reports whether l can be exactly the current state.
func (st leaseState) is(l elector.Lease) bool {
	if st.Free || l.Holder != st.Holder || l.TTL != st.TTL {
		return false
	}
	if st.Vague {
		return l.Token >= st.Token && l.Version >= st.Version
	}
	return l.Token == st.Token && l.Version == st.Version
}

// mayObserve reports whether a TryAcquire observing obs may find it
// current (always, for the compare-and-set, if the state is exact).
func (st leaseState) mayObserve(obs elector.Lease) bool {
	if st.Free || obs.Token == 0 {
		return false
	}
	if st.Vague {
		return obs.Token >= st.Token && obs.Version >= st.Version
	}
	return obs.Token == st.Token && obs.Version == st.Version
}

// mayBeTerm reports whether l may be the current, unreleased term (the
// compare-and-set of Renew and Release), and isTerm whether it surely is.
func (st leaseState) mayBeTerm(l elector.Lease) bool {
	return !st.Free && l.Holder == st.Holder && (l.Token == st.Token || st.Vague && l.Token >= st.Token)
}

func (st leaseState) isTerm(l elector.Lease) bool {
	return !st.Free && !st.Vague && l.Holder == st.Holder && l.Token == st.Token
}

// released is the state after term l is released: the token stays, the
// version grows by an unknown amount.
func (st leaseState) released(l elector.Lease) leaseState {
	return leaseState{Free: true, Token: l.Token, Version: st.Version + 1}
}

// step returns the states the lease may be in after the operation, none if
// the store could not have returned out from st.
func step(st leaseState, in leaseInput, out leaseOutput) []leaseState {
	l := out.lease
	switch in.op {
	case opAcquire:
		// A held lease is taken only if it is the observed one; the new
		// term must then exceed it, and the old one in any case.
		floor := st
		if !st.Free {
			floor.Token, floor.Version = in.lease.Token, in.lease.Version
		}
		mayTake := st.Free || st.mayObserve(in.lease)
		switch out.outcome {
		case succeeded:
			if mayTake && l.Holder == in.holder && l.TTL == in.ttl &&
				l.Token > floor.Token && l.Version > floor.Version {
				return []leaseState{heldAs(l)}
			}
		case refused: // the HeldError must carry exactly the current lease
			if st.is(l) && !l.Is(in.lease) {
				return []leaseState{heldAs(l)}
			}
		case unknown:
			if mayTake {
				return []leaseState{st, {Holder: in.holder, Token: floor.Token + 1, Version: floor.Version + 1, TTL: in.ttl, Vague: true}}
			}
			return []leaseState{st}
		}
	case opRenew:
		switch out.outcome {
		case succeeded:
			if st.mayBeTerm(in.lease) && l.Holder == in.lease.Holder && l.Token == in.lease.Token &&
				l.TTL == in.ttl && l.Version > st.Version {
				return []leaseState{heldAs(l)}
			}
		case refused: // ErrLeaseLost
			if !st.isTerm(in.lease) {
				return []leaseState{st}
			}
		case unknown:
			if st.mayBeTerm(in.lease) {
				renewed := leaseState{Holder: in.lease.Holder, Token: in.lease.Token, Version: st.Version + 1, TTL: in.ttl, Vague: true}
				return []leaseState{st, renewed}
			}
			return []leaseState{st}
		}
	case opRelease: // nil whether or not it released; unknown just the same
		switch {
		case st.isTerm(in.lease) && out.outcome == succeeded:
			return []leaseState{st.released(in.lease)}
		case st.mayBeTerm(in.lease):
			return []leaseState{st, st.released(in.lease)}
		default:
			return []leaseState{st}
		}
	case opGet:
		switch out.outcome {
		case succeeded:
			if st.is(l) {
				return []leaseState{heldAs(l)}
			}
		case refused: // ErrNoLease
			if st.Free {
				return []leaseState{st}
			}
		case unknown:
			return []leaseState{st}
		}
	}
	return nil
}

// leaseModel is the Store contract for one lease name, as porcupine
// checks it.
var leaseModel = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{leaseState{Free: true}} },
	Step: func(state, input, output any) []any {
		var next []any
		for _, st := range step(state.(leaseState), input.(leaseInput), output.(leaseOutput)) {
			next = append(next, st)
		}
		return next
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(leaseInput), output.(leaseOutput)
		var call string
		switch in.op {
		case opAcquire:
			call = fmt.Sprintf("TryAcquire(%s, %v, observed %s)", in.holder, in.ttl, describeLease(in.lease))
		case opRenew:
			call = fmt.Sprintf("Renew(%s, %v)", describeLease(in.lease), in.ttl)
		case opRelease:
			call = fmt.Sprintf("Release(%s)", describeLease(in.lease))
		case opGet:
			call = "Get()"
		}
		switch {
		case out.outcome == unknown:
			return fmt.Sprintf("%s → unknown: %v", call, out.err)
		case in.op == opRelease:
			return call + " → nil"
		case out.outcome == succeeded:
			return fmt.Sprintf("%s → %s", call, describeLease(out.lease))
		case in.op == opAcquire:
			return fmt.Sprintf("%s → held: %s", call, describeLease(out.lease))
		case in.op == opRenew:
			return call + " → ErrLeaseLost"
		default:
			return call + " → ErrNoLease"
		}
	},
	DescribeState: func(state any) string {
		st := state.(leaseState)
		switch {
		case st.Free:
			return fmt.Sprintf("free (next token > %d, next version > %d)", st.Token, st.Version)
		case st.Vague:
			return fmt.Sprintf("%s token ≥ %d version ≥ %d ttl %v (after an unknown outcome)", st.Holder, st.Token, st.Version, st.TTL)
		}
		return fmt.Sprintf("%s token %d version %d ttl %v", st.Holder, st.Token, st.Version, st.TTL)
	},
}).ToModel()

func describeLease(l elector.Lease) string {
	if l.Token == 0 {
		return "nothing"
	}
	return fmt.Sprintf("{%s token %d version %d ttl %v}", l.Holder, l.Token, l.Version, l.TTL)
}
