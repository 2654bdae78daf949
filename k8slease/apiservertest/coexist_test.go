package apiservertest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/clock"
)

// The client-go elector of the coexistence test, and the leaderaware one:
// TTL 2s is leaseDurationSeconds 3, client-go's LeaseDuration; renewals
// under a second apart, which client-go's whole-second renewTime cannot
// tell apart.
const (
	cgLeaseDuration = 3 * time.Second
	cgRenewDeadline = 2 * time.Second
	cgRetryPeriod   = 500 * time.Millisecond
	laTTL           = 2 * time.Second
	laRenew         = 300 * time.Millisecond
)

// leaderships records when each elector led, on one clock.
type leaderships struct {
	mu    sync.Mutex
	spans []span
}

type span struct {
	who        string
	start, end time.Time // end is zero while it leads
}

func (l *leaderships) begin(who string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.spans = append(l.spans, span{who: who, start: clock.Now()})
	return len(l.spans) - 1
}

func (l *leaderships) finish(i int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.spans[i].end = clock.Now()
}

// check fails t if two electors ever led at once.
func (l *leaderships) check(t *testing.T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := clock.Now()
	for i, a := range l.spans {
		for _, b := range l.spans[i+1:] {
			ae, be := a.end, b.end
			if ae.IsZero() {
				ae = now
			}
			if be.IsZero() {
				be = now
			}
			if a.start.Before(be) && b.start.Before(ae) {
				t.Errorf("%s (led %v–%v) and %s (led %v–%v) led at once", a.who, a.start.Sub(l.spans[0].start), ae.Sub(l.spans[0].start),
					b.who, b.start.Sub(l.spans[0].start), be.Sub(l.spans[0].start))
			}
		}
	}
}

// clientGo is one run of a client-go LeaderElector with a LeaseLock.
type clientGo struct {
	leading chan time.Time // receives when it starts leading
	cancel  context.CancelFunc
	done    chan struct{}
}

// runClientGo runs a client-go elector for the Lease name in ns until stop;
// with release, it releases the Lease when stopped (ReleaseOnCancel), and
// otherwise it stops as a crashed process does, leaving the Lease held.
func runClientGo(t *testing.T, ns, name, id string, release bool, led *leaderships) *clientGo {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: name, Namespace: ns},
		Client:     admin(t).CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	c := &clientGo{leading: make(chan time.Time, 1), done: make(chan struct{})}
	var span int
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: cgLeaseDuration, RenewDeadline: cgRenewDeadline, RetryPeriod: cgRetryPeriod,
		ReleaseOnCancel: release, Name: id,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {},
			OnStoppedLeading: func() {},
			OnNewLeader:      func(string) {},
		},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	// OnStartedLeading runs on a goroutine of its own: watch IsLeader on
	// this one instead. client-go leads while IsLeader and Run has not
	// returned.
	go func() {
		defer close(c.done)
		ran := make(chan struct{})
		go func() { defer close(ran); le.Run(ctx) }()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		leading := false
		for {
			select {
			case <-tick.C:
			case <-ran:
				if leading {
					led.finish(span)
				}
				return
			}
			if now := le.IsLeader(); now && !leading {
				leading = true
				span = led.begin(id)
				select {
				case c.leading <- clock.Now():
				default:
				}
			}
		}
	}()
	return c
}

// stop stops the elector and waits for it: its leadership ended when stop
// returns.
func (c *clientGo) stop() {
	c.cancel()
	<-c.done
}

// TestCoexistWithClientGo: a client-go elector and a leaderaware one on one
// Lease, started and stopped in turn and at once, each also crashing: never
// both leading, and every handoff within client-go's LeaseDuration +
// RetryPeriod (plus a margin for a loaded machine).
func TestCoexistWithClientGo(t *testing.T) {
	ns := newNamespace(t)
	const name = "coexist"
	led := &leaderships{}
	defer led.check(t)
	store := newStore(t, ns)
	newOurs := func(holder string) *elector.LeaseElector {
		e, err := elector.New(store, name, elector.Config{Holder: holder, TTL: laTTL, RenewInterval: laRenew, RetryInterval: time.Minute})
		require.NoError(t, err)
		return e
	}
	const within = cgLeaseDuration + cgRetryPeriod + time.Second // the second is for a loaded machine
	// After a leaderaware crash, client-go waits the leaseDurationSeconds
	// the store writes (laTTL rounded up, plus one: 3s) from the poll that
	// first saw the last renewal, which may come after the crash, and polls
	// every RetryPeriod jittered by leaderelection.JitterFactor (1.2): up to
	// two polls past the crash.
	const withinOurCrash = 3*time.Second + 2*cgRetryPeriod*22/10 + time.Second
	type ours struct {
		term elector.Term
		at   time.Time
		span int
	}
	campaign := func(e *elector.LeaseElector) <-chan ours {
		ch := make(chan ours, 1)
		go func() {
			ctx := testCtx(t)
			term, err := e.Campaign(ctx)
			for err != nil && ctx.Err() == nil {
				// A store call that overran its trust window on a loaded
				// machine: campaign again, as the decorator does.
				t.Logf("campaign: %v; campaigning again", err)
				term, err = e.Campaign(ctx)
			}
			if err != nil {
				t.Errorf("campaign: %v", err)
				close(ch)
				return
			}
			i := led.begin(term.Lease().Holder)
			go func() { <-term.Done(); led.finish(i) }()
			ch <- ours{term, clock.Now(), i}
		}()
		return ch
	}
	waitOurs := func(ch <-chan ours, what string) ours {
		t.Helper()
		select {
		case o, ok := <-ch:
			require.True(t, ok, what)
			return o
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: leaderaware did not lead within 30s", what)
			return ours{}
		}
	}
	waitCG := func(c *clientGo, what string) time.Time {
		t.Helper()
		select {
		case at := <-c.leading:
			return at
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: client-go did not lead within 30s", what)
			return time.Time{}
		}
	}
	handoff := func(what string, d, bound time.Duration) {
		t.Helper()
		t.Logf("%s: %v", what, d)
		assert.Less(t, d, bound, what)
	}
	ourTerm := func(o ours) elector.Term { return o.term }

	// client-go leads; it stops and releases: leaderaware leads.
	cg := runClientGo(t, ns, name, "cg-1", true, led)
	waitCG(cg, "client-go first")
	gotOurs := campaign(newOurs("la-1"))
	time.Sleep(cgLeaseDuration) // leaderaware waits and must not lead
	stopped := clock.Now()
	cg.stop()
	o := waitOurs(gotOurs, "after client-go released")
	handoff("client-go released, leaderaware leads after", o.at.Sub(stopped), within)

	// leaderaware leads; it resigns: client-go leads.
	cg = runClientGo(t, ns, name, "cg-2", false, led)
	time.Sleep(cgLeaseDuration) // client-go waits and must not lead
	resigned := clock.Now()
	require.NoError(t, ourTerm(o).Resign(testCtx(t)))
	handoff("leaderaware resigned, client-go leads after", waitCG(cg, "after leaderaware resigned").Sub(resigned), within)

	// client-go crashes (no release): leaderaware leads after the lease
	// duration.
	gotOurs = campaign(newOurs("la-2"))
	time.Sleep(cgLeaseDuration)
	crashed := clock.Now()
	cg.stop()
	o = waitOurs(gotOurs, "after client-go crashed")
	handoff("client-go crashed, leaderaware leads after", o.at.Sub(crashed), within)

	// leaderaware crashes (no release): client-go leads after the lease
	// duration.
	cg = runClientGo(t, ns, name, "cg-3", true, led)
	time.Sleep(cgLeaseDuration)
	crashed = clock.Now()
	ourTerm(o).Abandon()
	handoff("leaderaware crashed, client-go leads after", waitCG(cg, "after leaderaware crashed").Sub(crashed), withinOurCrash)
	cg.stop()

	// Both start at once on a free Lease, three times: one leads, and the
	// other takes over when it stops.
	for i := range 3 {
		cg = runClientGo(t, ns, name, fmt.Sprintf("cg-at-once-%d", i), true, led)
		gotOurs = campaign(newOurs(fmt.Sprintf("la-at-once-%d", i)))
		select {
		case <-cg.leading:
			stopped = clock.Now()
			cg.stop()
			o = waitOurs(gotOurs, "at once, after client-go")
			handoff("at once: client-go led first; leaderaware leads after its release", o.at.Sub(stopped), within)
			require.NoError(t, o.term.Resign(testCtx(t)))
		case o = <-gotOurs:
			require.NotNil(t, o.term)
			cg2 := cg
			resigned = clock.Now()
			require.NoError(t, o.term.Resign(testCtx(t)))
			handoff("at once: leaderaware led first; client-go leads after its resignation", waitCG(cg2, "at once, after leaderaware").Sub(resigned), within)
			cg2.stop()
		case <-time.After(30 * time.Second):
			t.Fatal("at once: nobody led within 30s")
		}
	}
}
