package elector_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/stepclock"
)

// resumeBound is how soon after a resume a term must have acted on it: well
// under the 100 ms tick of the jobs in the suspend tests, and far under a
// RenewInterval.
const resumeBound = 100 * time.Millisecond

// campaignCfg wins a term with cfg that the test resigns when it ends,
// whatever the outcome.
func campaignCfg(t *testing.T, s elector.Store, cfg elector.Config) elector.Term {
	term := campaign(t, newElector(t, s, "a", cfg))
	t.Cleanup(func() { assert.NoError(t, term.Resign(context.Background())) })
	return term
}

// requireEndsOnLongSuspend simulates a suspend of c past term's trust
// window and checks that the term has expired resumeBound later.
func requireEndsOnLongSuspend(t *testing.T, c *stepclock.Clock, term elector.Term) {
	t.Helper()
	c.Suspend(time.Minute)
	time.Sleep(resumeBound)
	synctest.Wait()
	select {
	case <-term.Done():
	default:
		t.Fatalf("the term is still open %v after a resume past its trust window", resumeBound)
	}
	require.ErrorIs(t, term.Err(), elector.ErrLeaseExpired)
}

func trustOf(term elector.Term) time.Duration {
	return term.(interface{ TrustRemaining() time.Duration }).TrustRemaining()
}

// TestSuspendEndsTermAtOnce: after a suspend past the trust window, the term
// ends within resumeBound, not when its renewal timer (which the suspend
// delayed) fires RenewInterval later.
func TestSuspendEndsTermAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := stepclock.New()
		s := &countingStore{Store: elector.NewMemoryStoreOn(c)}
		term := campaignCfg(t, s, elector.Config{})
		time.Sleep(time.Second)
		requireEndsOnLongSuspend(t, c, term)
		assert.Zero(t, s.renews.Load(), "no renewal after the trust window closed during the suspend")
	})
}

// TestSuspendAsTheFirstTermStartsEndsItAtOnce: a suspend past the trust
// window right after a Store's first term starts, before its resume watch
// runs, ends the term within resumeBound too.
func TestSuspendAsTheFirstTermStartsEndsItAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := stepclock.New()
		term := campaignCfg(t, elector.NewMemoryStoreOn(c), elector.Config{})
		requireEndsOnLongSuspend(t, c, term)
	})
}

// TestShortSuspendRenewsAtOnce: a suspend that leaves the term less trust
// than its renewal timer's delay (due at 5 s of Go's clock, that is 15 s of
// the elapsed one, past the trust window at 13.5 s) renews at once on
// resume instead of letting the term run out.
func TestShortSuspendRenewsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := stepclock.New()
		s := &countingStore{Store: elector.NewMemoryStoreOn(c)}
		term := campaignCfg(t, s, elector.Config{})
		time.Sleep(time.Second)
		c.Suspend(10 * time.Second) // 2.5 s of trust left
		time.Sleep(resumeBound)
		synctest.Wait()
		require.EqualValues(t, 1, s.renews.Load(), "the renewal due during the suspend runs on resume")
		assert.Greater(t, trustOf(term), 13*time.Second)
		time.Sleep(time.Minute)
		require.NoError(t, term.Err(), "the term ran out after a suspend shorter than its trust window")
	})
}

// TestSuspendDuringRenewalEndsTermAtOnce: a renewal stuck in the store when
// the machine suspends past the trust window does not keep the term open
// after the resume.
func TestSuspendDuringRenewalEndsTermAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := stepclock.New()
		s := &stuckStore{countingStore: countingStore{Store: elector.NewMemoryStoreOn(c)}}
		s.stuck.Store(1)
		term := campaignCfg(t, s, elector.Config{})
		time.Sleep(6 * time.Second) // the renewal at 5 s hangs
		requireEndsOnLongSuspend(t, c, term)
	})
}

// TestShortSuspendDuringRenewalEndsTermOnTime: a renewal stuck in the store
// through a suspend that leaves trust ends the term when the trust window
// closes on the elapsed clock (13.5 s after the acquire, 8.5 s of Go's
// clock), not the suspend's length later.
func TestShortSuspendDuringRenewalEndsTermOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := stepclock.New()
		s := &stuckStore{countingStore: countingStore{Store: elector.NewMemoryStoreOn(c)}}
		s.stuck.Store(10)
		start := time.Now()
		term := campaignCfg(t, s, elector.Config{})
		time.Sleep(6 * time.Second) // the renewal at 5 s hangs
		c.Suspend(5 * time.Second)
		<-term.Done()
		assert.Equal(t, 8500*time.Millisecond, time.Since(start).Round(resumeBound))
		require.ErrorIs(t, term.Err(), elector.ErrLeaseExpired)
	})
}

// TestTermsOfOneStoreShareOneResumeWatch: the terms held through one Store
// add one resume watch between them, not one each, and it ends with the
// last.
func TestTermsOfOneStoreShareOneResumeWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := elector.NewMemoryStore()
		var terms []elector.Term
		for i := range 10 {
			e, err := elector.New(s, fmt.Sprintf("job%d", i), fast)
			require.NoError(t, err)
			terms = append(terms, campaign(t, e))
		}
		time.Sleep(time.Second) // the watch starts a moment after the first term
		synctest.Wait()
		assert.Equal(t, 1, goroutinesIn(resumeWatch))
		for _, term := range terms {
			require.NoError(t, term.Resign(t.Context()))
		}
		assert.Zero(t, goroutinesIn(resumeWatch), "after the last Resign")
	})
}

// resumeWatch is the frame of a Store's resume watch.
const resumeWatch = "elector.(*scheduler).watchResumes("

// goroutinesIn counts the goroutines whose stack has a frame of fn.
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), fn)
}
