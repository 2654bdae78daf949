package sqlitelease_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/helperproc"
)

// Multi-process tests: the holder is a real process (this test binary run
// again as a helper in mode holder, see helperproc.StartHolder), killed,
// stopped or terminated by signals; the candidate is the test process.

// startHolder starts a holder process of the lease "job" on the file at
// path with the given TTL and returns once it leads.
func startHolder(t *testing.T, path string, ttl time.Duration) *helperproc.Holder {
	t.Helper()
	return helperproc.StartHolder(t, path, "job", "child", ttl)
}

// stopHolder stops the holder h with SIGSTOP and returns once the kernel shows it
// stopped.
func stopHolder(t *testing.T, h *helperproc.Holder) {
	t.Helper()
	require.NoError(t, h.Cmd.Process.Signal(syscall.SIGSTOP))
	stat := fmt.Sprintf("/proc/%d/stat", h.Cmd.Process.Pid)
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(stat)
		if err != nil {
			return false
		}
		fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		return len(fields) > 0 && fields[0] == "T"
	}, 5*time.Second, time.Millisecond, "the holder child did not stop")
}

// waitingCandidate starts a candidate's Campaign on its own Store of path,
// with the given TTL and RetryInterval, and returns once the candidate has
// found the lease held (and waits).
func waitingCandidate(t *testing.T, ctx context.Context, path string, ttl, retry time.Duration) <-chan campaignResult {
	t.Helper()
	b := &countingStore{S: openPath(t, path)}
	e, err := elector.New(b, "job", elector.Config{TTL: ttl, RetryInterval: retry, Holder: "candidate"})
	require.NoError(t, err)
	won := make(chan campaignResult, 1)
	go func() {
		term, err := e.Campaign(ctx)
		won <- campaignResult{term, err, time.Now()}
	}()
	require.Eventually(t, func() bool { return b.Acquires.Load() > 0 }, 5*time.Second, time.Millisecond)
	time.Sleep(30 * time.Millisecond) // in its wait now
	select {
	case r := <-won:
		t.Fatalf("the candidate's Campaign returned while the holder leads: %v", r.err)
	default:
	}
	return won
}

// TestProcessKilled: a holder process killed with SIGKILL is replaced
// within milliseconds, at TTL 15 s, by a candidate that waits in Campaign
// (RetryInterval 10 s): the kernel drops the dead process's lock.
func TestProcessKilled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	h := startHolder(t, path, 15*time.Second)
	won := waitingCandidate(t, bg(t), path, 15*time.Second, 10*time.Second)

	start := time.Now()
	require.NoError(t, h.Cmd.Process.Signal(syscall.SIGKILL))
	r := requireWon(t, won, 5*time.Second)
	took := r.at.Sub(start)
	t.Logf("SIGKILL → new leader: %v", took)
	assert.Less(t, took, deathBound)
	assert.Greater(t, r.term.Token(), h.Token)
	require.NoError(t, r.term.Resign(bg(t)))
}

// TestProcessStopped: a holder process stopped with SIGSTOP keeps its lock,
// so it is not taken for dead: a candidate (TTL 15 s, retrying every 50 ms)
// does not take the lease over during 1.5 s, and a fresh TryAcquire is
// refused. Once the stopped process is killed, the candidate leads within
// milliseconds.
func TestProcessStopped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	h := startHolder(t, path, 15*time.Second)
	stopHolder(t, h)

	ctx, cancel := context.WithTimeout(bg(t), 1500*time.Millisecond)
	defer cancel()
	won := waitingCandidate(t, ctx, path, 15*time.Second, 50*time.Millisecond)
	r := <-won
	require.ErrorIs(t, r.err, context.DeadlineExceeded, "a stopped holder must not be taken over before its TTL")
	requireHeld(t, openPath(t, path), "job", "other")

	won = waitingCandidate(t, bg(t), path, 15*time.Second, 10*time.Second)
	start := time.Now()
	require.NoError(t, h.Cmd.Process.Signal(syscall.SIGKILL))
	r = requireWon(t, won, 5*time.Second)
	took := r.at.Sub(start)
	t.Logf("SIGKILL of the stopped holder → new leader: %v", took)
	assert.Less(t, took, deathBound)
	require.NoError(t, r.term.Resign(bg(t)))
}

// TestProcessStoppedElapsedTime: the elapsed-time rule still governs a
// stopped holder: a candidate takes its lease over only after it has
// watched it unchanged for the TTL (1 s here), not before.
func TestProcessStoppedElapsedTime(t *testing.T) {
	const ttl = time.Second
	path := filepath.Join(t.TempDir(), "leases.db")
	h := startHolder(t, path, ttl)
	stopHolder(t, h)

	b := openPath(t, path)
	e, err := elector.New(b, "job", elector.Config{TTL: ttl, RetryInterval: 50 * time.Millisecond, Holder: "candidate"})
	require.NoError(t, err)
	start := time.Now()
	term, err := e.Campaign(bg(t))
	require.NoError(t, err)
	took := time.Since(start)
	t.Logf("stopped holder (TTL %v) taken over after %v", ttl, took)
	assert.GreaterOrEqual(t, took, ttl, "not before the candidate watched the lease for the TTL")
	assert.Less(t, took, ttl+time.Second)
	assert.Greater(t, term.Token(), h.Token)
	require.NoError(t, term.Resign(bg(t)))
}

// TestProcessTerminated: a holder process that gets SIGTERM resigns and
// closes its store; the waiting candidate leads within milliseconds.
func TestProcessTerminated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	h := startHolder(t, path, 15*time.Second)
	won := waitingCandidate(t, bg(t), path, 15*time.Second, 10*time.Second)

	start := time.Now()
	require.NoError(t, h.Cmd.Process.Signal(syscall.SIGTERM))
	r := requireWon(t, won, 5*time.Second)
	took := r.at.Sub(start)
	t.Logf("SIGTERM → new leader: %v", took)
	assert.Less(t, took, deathBound)
	require.NoError(t, r.term.Resign(bg(t)))
	require.NoError(t, h.Wait(), "the holder exits cleanly; stderr:\n%s", h.Stderr())
}
