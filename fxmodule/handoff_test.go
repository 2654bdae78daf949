package fxmodule_test

import "testing"

// TestTwoAppsOneFile runs two apps with the same job type on one SQLite
// file: exactly one runs the job; stopping that app hands the job to the
// other within handoffBound, and the two never run it at once.
func TestTwoAppsOneFile(t *testing.T) {
	path := dbPath(t)
	shared := new(counters)
	a, b := newCountingJob(shared), newCountingJob(shared)
	requireHandoff(t, shared,
		replica{jobApp(t, path, "replica-a", a, nil).RequireStart(), a, "replica-a"},
		replica{jobApp(t, path, "replica-b", b, nil).RequireStart(), b, "replica-b"},
		nil)
}
