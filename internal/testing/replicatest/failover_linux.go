//go:build linux

package replicatest

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/internal/testing/helperproc"

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

// FailoverOption changes what [Failover] checks.
type FailoverOption func(*failoverChecks)

type failoverChecks struct{ deathDetected bool }

// DeathDetected tells [Failover] that the store sees a holder's process die
// (SQLite on Linux: the kernel drops the holder's lock on its liveness
// byte): a crashed leader, and a leader that died before a fresh candidate
// started, must be replaced within the margin of the kill, not after a TTL.
func DeathDetected() FailoverOption { return func(c *failoverChecks) { c.deathDetected = true } }

// Failover runs replicas a, b, c and d as processes, each with a store of
// its own (the helper in mode replica, given args and the replica flags), and
// checks, with margin:
//
//  1. crash: once the leader is killed (SIGKILL), a waiting replica leads
//     no sooner than TTL after the killed leader's last renewal (so never
//     inside its trust window) and no later than TTL + RetryInterval +
//     margin after it (with DeathDetected: within the margin of the kill);
//  2. freeze: the same bounds for a leader stopped with SIGSTOP, which is
//     alive but renews no more; once resumed (SIGCONT), it stops its job
//     within resumeStop;
//  3. graceful: a leader stopped with SIGTERM stops its job and hands over
//     within 1s of the signal;
//  4. fresh candidate: a replica e started while the leader is frozen and
//     its lease already older than its TTL waits a TTL from its start (it
//     never saw the lease renewed), and no more than RetryInterval + margin
//     beyond;
//  5. with DeathDetected, a replica f started after the leader died leads
//     within the margin of its start;
//
// and that tokens grow, and no two jobs of different terms ever ran at
// once, the frozen leaders' excused until they could stop. A leader's last
// renewal is the Written time of its lease, which reader, a store of the
// test's, reads: the writer's wall clock, or the database server's, on
// this host. A reader whose Get fails while a leader is frozen (SQLite: it
// was frozen inside a write and holds the file's lock) makes Failover
// resume that leader and freeze it again a little later.
func Failover(t *testing.T, args []string, reader elector.Store, opts ...FailoverOption) {
	var checks failoverChecks
	for _, o := range opts {
		o(&checks)
	}
	c := newCluster(t, slices.Concat(args, procTimings())...)
	read := func(ctx context.Context) (elector.Lease, error) { return reader.Get(ctx, helperproc.LeaseName) }
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
	killed := time.Now()
	c.kill(first.holder)
	var renewed time.Time
	if !checks.deathDetected { // the lease stays the dead leader's until its TTL has passed
		renewed = lastRenewal(t, read, first.holder)
	}
	second, i, ok := c.next(i+1, upper+5*time.Second, is("START", ""))
	if !ok {
		t.Fatalf("nobody led within %v of %s's crash", upper+5*time.Second, first.holder)
	}
	var crash time.Duration
	if checks.deathDetected {
		crash = second.at.Sub(killed)
		if crash > procMargin {
			t.Errorf("crashed leader: %s took over %v after %s was killed, more than %v: the death of the holder should end its lease at once",
				second.holder, crash, first.holder, procMargin)
		}
		checkToken(t, first, second)
	} else {
		crash = checkTakeover(t, "crashed leader", first, second, renewed)
	}

	// 2. Freeze, then resume.
	renewed = c.freeze(second.holder, read)
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
	c.kill(second.holder) // leaves one candidate for 3, and none for 4

	// 3. Graceful.
	terminated := time.Now()
	c.signal(third.holder, syscall.SIGTERM)
	stopped, _, ok := c.next(i+1, 10*time.Second, is("STOP", third.holder))
	if !ok {
		t.Fatalf("%s did not stop its job within 10s of SIGTERM", third.holder)
	}
	fourth, i, ok := c.next(i+1, 10*time.Second, func(l line) bool { return l.kind == "START" && l.token > third.token })
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

	// 4. A fresh candidate, started once the frozen leader's lease is
	// already older than its TTL, waits a TTL from its start.
	renewed = c.freeze(fourth.holder, read)
	time.Sleep(time.Until(renewed.Add(procTTL + 200*time.Millisecond)))
	c.start("e")
	started := time.Now()
	fifth, i, ok := c.next(i+1, upper+5*time.Second, is("START", "e"))
	if !ok {
		t.Fatalf("e did not lead within %v of its start", upper+5*time.Second)
	}
	fresh := fifth.at.Sub(started)
	if fresh < procTTL-procSlack {
		t.Errorf("fresh candidate: e took over %v after it started, before watching the lease for its TTL %v", fresh, procTTL)
	}
	if fresh > upper {
		t.Errorf("fresh candidate: e took over %v after it started, more than TTL + RetryInterval + %v = %v", fresh, procMargin, upper)
	}
	checkToken(t, fourth, fifth)
	c.kill(fourth.holder)

	// 5. A fresh candidate after a crash.
	var freshDead time.Duration
	if checks.deathDetected {
		c.kill("e")
		c.start("f")
		started := time.Now()
		sixth, _, ok := c.next(i+1, upper+5*time.Second, is("START", "f"))
		if !ok {
			t.Fatalf("f did not lead within %v of its start", upper+5*time.Second)
		}
		if freshDead = sixth.at.Sub(started); freshDead > procMargin {
			t.Errorf("fresh candidate after a crash: f took over %v after it started, more than %v: the death of the holder should end its lease at once", freshDead, procMargin)
		}
		checkToken(t, fifth, sixth)
	}

	lines, pauses := c.snapshot()
	violations, excused := overlaps(jobRuns(lines), pauses, resumeStop)
	for _, v := range violations {
		t.Error(v)
	}
	for _, e := range excused {
		t.Log("excused: " + e)
	}
	t.Logf("failover: crash %v, freeze %v after the last renewal (bounds [%v, %v]), resumed leader stopped %v after SIGCONT, graceful handoff %v after SIGTERM, fresh candidate %v after its start (after a crash: %v)",
		crash.Round(time.Millisecond), frozen.Round(time.Millisecond), procTTL, upper,
		stop.at.Sub(resumed).Round(time.Millisecond), handoff.Round(time.Millisecond),
		fresh.Round(time.Millisecond), freshDead.Round(time.Millisecond))
}

// freeze stops holder's process with SIGSTOP and returns the last renewal
// of its lease. If read fails (a process stopped inside a write of a SQLite
// file holds the file's lock, so that nobody could take over until it
// resumes), freeze resumes it and tries again a little later.
func (c *cluster) freeze(holder string, read func(context.Context) (elector.Lease, error)) time.Time {
	c.t.Helper()
	for try := 0; ; try++ {
		c.signal(holder, syscall.SIGSTOP)
		ctx, cancel := context.WithTimeout(c.t.Context(), time.Second)
		l, err := read(ctx)
		cancel()
		if err == nil {
			if l.Holder != holder {
				c.t.Fatalf("the lease is %s's (token %d), want the frozen leader %s's", l.Holder, l.Token, holder)
			}
			return l.Written
		}
		if try == 4 {
			c.t.Fatalf("read the lease of frozen %s: %v", holder, err)
		}
		c.t.Logf("read the lease of frozen %s: %v; resuming it to try again", holder, err)
		c.signal(holder, syscall.SIGCONT)
		time.Sleep(200 * time.Millisecond)
	}
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
