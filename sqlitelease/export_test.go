package sqlitelease

import (
	"context"
	"time"
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

// TestedHolders returns how many holders the poller of s tests the
// liveness of on each wake-up: those of its watched leases not found gone.
func TestedHolders(s *Store) int {
	s.watch.mu.Lock()
	defer s.watch.mu.Unlock()
	n := 0
	for _, h := range s.watch.holders {
		if !h.gone {
			n++
		}
	}
	return n
}

// LivenessTests returns how many times the poller of s has woken and how
// many liveness bytes it has tested, in all.
func LivenessTests(s *Store) (polls, tests uint64) {
	s.watch.mu.Lock()
	defer s.watch.mu.Unlock()
	return s.watch.polls, s.watch.liveTests
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

// WatchReads returns how many times s has read its watched leases from the
// file (one batched statement each).
func WatchReads(s *Store) uint64 {
	s.watch.mu.Lock()
	defer s.watch.mu.Unlock()
	return s.watch.reads
}

// SetOpenHook makes Open call fn after it has set up the schema, and
// returns a function that removes it.
func SetOpenHook(fn func()) (restore func()) {
	testHookSetUp = fn
	return func() { testHookSetUp = nil }
}

// Occupy runs a lease operation of s that waits until the returned
// function is called, which waits for it to end.
func Occupy(s *Store) (release func()) {
	started, stop, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_ = s.worker.run(context.Background(), func() error {
			close(started)
			<-stop
			return nil
		})
	}()
	<-started
	return func() { close(stop); <-done }
}
