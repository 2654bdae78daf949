package sqlitelease

import (
	"context"
	"database/sql"
	"time"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/leaseterm"
)

// Die drops the liveness lock of s without clearing the liveness records of
// its leases, as the death of its process would, as far as other Stores can
// see. s keeps working otherwise; Close it as usual.
func Die(s *Store) error { return s.live.close() }

// LiveRecord returns the liveness file identity and byte that s records in
// the leases it acquires and renews (zero values without a sidecar).
func LiveRecord(s *Store) (file string, offset int64) {
	if s.live == nil {
		return "", 0
	}
	return s.live.file, s.live.offset
}

// SetCloseTimeout sets how long Close tries to clear liveness records, and
// returns a function that restores it.
func SetCloseTimeout(d time.Duration) (restore func()) {
	old := closeTimeout
	closeTimeout = d
	return func() { closeTimeout = old }
}

// Locked reports whether s, testing through its own liveness file, finds the
// liveness lock of other held.
func Locked(s, other *Store) (bool, error) { return s.live.held(other.live.offset) }

// SetReadRecheck sets how long a passing check of the file serves lease
// reads, and returns a function that restores it.
func SetReadRecheck(d time.Duration) (restore func()) {
	old := readRecheck
	readRecheck = d
	return func() { readRecheck = old }
}

// SetOpenHook makes Open call fn after it has set up the schema, and
// returns a function that removes it.
func SetOpenHook(fn func()) (restore func()) {
	testHookSetUp = fn
	return func() { testHookSetUp = nil }
}

// Occupy keeps the lease operations of s waiting until the returned
// function is called.
func Occupy(s *Store) (release func()) {
	s.leaseSem <- struct{}{}
	return func() { <-s.leaseSem }
}

// FencedLease is Fenced for the bare lease l (see leaseterm): only the
// store's own checks can refuse it.
func (s *Store) FencedLease(ctx context.Context, l elector.Lease, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return s.Fenced(leaseterm.Context(ctx, l), fn)
}
