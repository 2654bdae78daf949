package fxmodule_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTwoAppsOneFile runs two apps with the same job type on one SQLite
// file: exactly one runs the job; stopping that app hands the job to the
// other within handoffBound, and the two never run it at once.
func TestTwoAppsOneFile(t *testing.T) {
	path := dbPath(t)
	shared := new(counters)
	a, b := newCountingJob(shared), newCountingJob(shared)
	appA := jobApp(t, path, "replica-a", a, nil).RequireStart()
	appB := jobApp(t, path, "replica-b", b, nil).RequireStart()

	require.Eventually(t, func() bool { return shared.running.Load() == 1 }, 5*time.Second, 5*time.Millisecond,
		"one of the two apps should run the job")
	// For two renew intervals, the follower never starts the job too.
	assert.Never(t, func() bool { return shared.running.Load() != 1 }, 2*fast.RenewInterval, 10*time.Millisecond,
		"exactly one app should run the job")

	leader, leaderApp, follower, followerApp := a, appA, b, appB
	if b.running.Load() {
		leader, leaderApp, follower, followerApp = b, appB, a, appA
	}
	require.Zero(t, follower.starts.Load(), "the follower must not have started the job")

	stopped := time.Now()
	leaderApp.RequireStop()
	assert.False(t, leader.running.Load(), "stopping the leader app stops its job")
	assert.EqualValues(t, 1, leader.stops.Load())
	require.Eventuallyf(t, follower.running.Load, handoffBound, 5*time.Millisecond,
		"the other app should run the job within %v of the leader's stop", handoffBound)
	t.Logf("handoff took %v", time.Since(stopped))

	followerApp.RequireStop()
	assert.False(t, follower.running.Load())
	assert.EqualValues(t, 1, shared.maxRunning.Load(), "the two apps ran the job at the same time")
	assert.Zero(t, a.noTerm.Load()+b.noTerm.Load(), "the inner Start got a context without the term")
}
