//go:build linux

package replicatest

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// The timings of the multi-process tests, and the margins of their bounds.
const (
	procTTL   = 1500 * time.Millisecond
	procRenew = 500 * time.Millisecond
	procRetry = 500 * time.Millisecond
	// procMargin covers process scheduling and the race detector in the
	// upper bounds.
	procMargin = time.Second
	// procSlack covers the clocks' granularity in the lower bounds, which
	// are safety: it is small.
	procSlack = 10 * time.Millisecond
	// resumeStop is how soon a frozen leader whose term ran out must stop
	// its job once resumed: its renewal timer is overdue and ends the term.
	resumeStop = time.Second
	// handoffBound bounds a graceful handoff: the release wakes the waiting
	// candidates.
	handoffBound = time.Second
)

func procTimings() []string {
	return []string{"-ttl", procTTL.String(), "-renew", procRenew.String(), "-retry", procRetry.String()}
}

// Failover runs replicas a, b, c and d as processes, each with a store of
// its own (the store's ReplicaChild, given args and the replica flags), and
// checks, with margin:
//
//  1. crash: once the leader is killed (SIGKILL), a waiting replica leads
//     no sooner than TTL after the killed leader's last renewal (so never
//     inside its trust window) and no later than TTL + RetryInterval +
//     margin after it;
//  2. freeze: the same bounds for a leader stopped with SIGSTOP, which is
//     alive but renews no more; once resumed (SIGCONT), it stops its job
//     within resumeStop;
//  3. graceful: a leader stopped with SIGTERM stops its job and hands over
//     within 1s of the signal;
//
// and that tokens grow, and no two jobs of different terms ever ran at
// once, the frozen leader's excused until it could stop. A leader's last
// renewal is the Written time of its lease, which reader, a store of the
// test's, reads: the writer's wall clock, or the database server's, on
// this host.
func Failover(t *testing.T, args []string, reader elector.Store) {
	c := newCluster(t, slices.Concat(args, procTimings())...)
	read := func(ctx context.Context) (elector.Lease, error) { return reader.Get(ctx, LeaseName) }
	for _, h := range []string{"a", "b", "c", "d"} {
		c.start(h)
	}
	first, i, ok := c.next(0, 30*time.Second, is("START", ""))
	if !ok {
		t.Fatal("no replica led within 30s")
	}
	if l, _, ok := c.next(i+1, time.Second, is("START", "")); ok {
		t.Fatalf("%s started token %d while %s leads", l.holder, l.token, first.holder)
	}
	upper := procTTL + procRetry + procMargin

	// 1. Crash.
	c.kill(first.holder)
	renewed := lastRenewal(t, read, first.holder)
	second, i, ok := c.next(i+1, upper+5*time.Second, is("START", ""))
	if !ok {
		t.Fatalf("nobody led within %v of %s's crash", upper+5*time.Second, first.holder)
	}
	crash := checkTakeover(t, "crashed leader", first, second, renewed)

	// 2. Freeze, then resume.
	c.signal(second.holder, syscall.SIGSTOP)
	renewed = lastRenewal(t, read, second.holder)
	third, i, ok := c.next(i+1, upper+5*time.Second, is("START", ""))
	if !ok {
		t.Fatalf("nobody led within %v of freezing %s", upper+5*time.Second, second.holder)
	}
	frozen := checkTakeover(t, "frozen leader", second, third, renewed)
	resumed := time.Now()
	c.signal(second.holder, syscall.SIGCONT)
	stop, _, ok := c.next(0, resumeStop+5*time.Second, func(l line) bool {
		return l.kind == "STOP" && l.holder == second.holder && l.token == second.token
	})
	switch {
	case !ok:
		t.Errorf("%s, resumed after %s took over, never stopped its job of token %d", second.holder, third.holder, second.token)
	case stop.at.Sub(resumed) > resumeStop:
		t.Errorf("%s, resumed after %s took over, stopped its job of token %d only %v later", second.holder, third.holder, second.token, stop.at.Sub(resumed))
	}

	// 3. Graceful.
	terminated := time.Now()
	c.signal(third.holder, syscall.SIGTERM)
	stopped, _, ok := c.next(i+1, 10*time.Second, is("STOP", third.holder))
	if !ok {
		t.Fatalf("%s did not stop its job within 10s of SIGTERM", third.holder)
	}
	fourth, _, ok := c.next(i+1, 10*time.Second, func(l line) bool { return l.kind == "START" && l.token > third.token })
	if !ok {
		t.Fatalf("nobody led within 10s of %s's SIGTERM", third.holder)
	}
	if fourth.at.Before(stopped.at) {
		t.Errorf("%s started token %d before %s stopped its job", fourth.holder, fourth.token, third.holder)
	}
	handoff := fourth.at.Sub(terminated)
	if handoff > handoffBound {
		t.Errorf("graceful handoff from %s to %s took %v from SIGTERM, more than %v", third.holder, fourth.holder, handoff, handoffBound)
	}
	checkToken(t, third, fourth)

	lines, pauses := c.snapshot()
	violations, excused := overlaps(jobRuns(lines), pauses, resumeStop)
	for _, v := range violations {
		t.Error(v)
	}
	for _, e := range excused {
		t.Log("excused: " + e)
	}
	t.Logf("failover: crash %v and freeze %v after the last renewal (bounds [%v, %v]), resumed leader stopped %v after SIGCONT, graceful handoff %v after SIGTERM",
		crash.Round(time.Millisecond), frozen.Round(time.Millisecond), procTTL, upper,
		stop.at.Sub(resumed).Round(time.Millisecond), handoff.Round(time.Millisecond))
}

// checkTakeover checks that after took over from before no sooner than TTL
// and no later than TTL + RetryInterval + margin after before's last
// renewal, and with a larger token, and returns that time.
func checkTakeover(t *testing.T, what string, before, after line, renewed time.Time) time.Duration {
	t.Helper()
	took := after.at.Sub(renewed)
	if took < procTTL-procSlack {
		t.Errorf("%s: %s took over from %s %v after its last renewal, before its TTL %v had passed: two leaders were possible",
			what, after.holder, before.holder, took, procTTL)
	}
	if upper := procTTL + procRetry + procMargin; took > upper {
		t.Errorf("%s: %s took over from %s %v after its last renewal, more than TTL + RetryInterval + %v = %v",
			what, after.holder, before.holder, took, procMargin, upper)
	}
	checkToken(t, before, after)
	return took
}

func checkToken(t *testing.T, before, after line) {
	t.Helper()
	if after.token <= before.token {
		t.Errorf("token %d (%s) after %d (%s): tokens must grow", after.token, after.holder, before.token, before.holder)
	}
}

// lastRenewal returns the Written time of the lease, which must be
// holder's.
func lastRenewal(t *testing.T, read func(context.Context) (elector.Lease, error), holder string) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	l, err := read(ctx)
	if err != nil {
		t.Fatalf("read the lease: %v", err)
	}
	if l.Holder != holder {
		t.Fatalf("the lease is %s's (token %d), want %s's", l.Holder, l.Token, holder)
	}
	return l.Written
}
