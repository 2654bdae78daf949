package sqlitelease_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// Multi-process tests: the holder is a real process (this test binary run
// again as a child, see holderChild), killed, stopped or terminated by
// signals; the candidate is the test process.

// childTTLEnv carries the holder's TTL to the child.
const childTTLEnv = "LEADERAWARE_SQLITELEASE_CHILD_TTL"

func init() { runChild = holderChild }

// holderChild is the child process: it opens the file named by childEnv,
// campaigns for the lease "job" with the TTL of childTTLEnv, prints
// "leading <token>" and holds the term (renewing it) until SIGTERM, on which
// it resigns and closes the store, or until its stdin closes (the test
// ended).
func holderChild() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "holder child:", err)
		return 1
	}
	ttl, err := time.ParseDuration(os.Getenv(childTTLEnv))
	if err != nil {
		return fail(err)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	s, err := sqlitelease.Open(os.Getenv(childEnv))
	if err != nil {
		return fail(err)
	}
	e, err := elector.New(s, "job", elector.Config{TTL: ttl, Holder: fmt.Sprintf("child-%d", os.Getpid())})
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	term, err := e.Campaign(ctx)
	if err != nil {
		return fail(err)
	}
	fmt.Printf("leading %d\n", term.Token())
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-sigs:
		if err := term.Resign(ctx); err != nil {
			return fail(err)
		}
		if err := s.Close(); err != nil {
			return fail(err)
		}
		return 0
	case <-eof:
		term.Abandon()
		return 0
	}
}

// holderProc is a running holder child.
type holderProc struct {
	cmd    *exec.Cmd
	token  uint64
	stderr bytes.Buffer // read only after the process ended
}

// startHolder starts a holder child on the file at path with the given TTL
// and returns once it leads. Cleanup kills it and waits for it.
func startHolder(t *testing.T, path string, ttl time.Duration) *holderProc {
	t.Helper()
	h := &holderProc{cmd: exec.Command(os.Args[0], "-test.run=^$")}
	h.cmd.Env = append(os.Environ(), childEnv+"="+path, childTTLEnv+"="+ttl.String())
	h.cmd.Stderr = &h.stderr
	stdin, err := h.cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := h.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, h.cmd.Start())
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = h.cmd.Process.Kill()
		_ = h.cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		_, err := fmt.Sscanf(l, "leading %d\n", &h.token)
		if err != nil {
			_ = h.cmd.Process.Kill()
			_ = h.cmd.Wait()
			t.Fatalf("the holder child printed %q (%v); its stderr:\n%s", l, err, h.stderr.String())
		}
	case <-time.After(30 * time.Second):
		_ = h.cmd.Process.Kill()
		_ = h.cmd.Wait()
		t.Fatalf("the holder child did not lead within 30s; its stderr:\n%s", h.stderr.String())
	}
	return h
}

// signal sends sig to the holder.
func (h *holderProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, h.cmd.Process.Signal(sig))
}

// stop stops the holder with SIGSTOP and returns once the kernel shows it
// stopped.
func (h *holderProc) stop(t *testing.T) {
	t.Helper()
	h.signal(t, syscall.SIGSTOP)
	stat := fmt.Sprintf("/proc/%d/stat", h.cmd.Process.Pid)
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
	h.signal(t, syscall.SIGKILL)
	r := requireWon(t, won, 5*time.Second)
	took := r.at.Sub(start)
	t.Logf("SIGKILL → new leader: %v", took)
	assert.Less(t, took, deathBound)
	assert.Greater(t, r.term.Token(), h.token)
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
	h.stop(t)

	ctx, cancel := context.WithTimeout(bg(t), 1500*time.Millisecond)
	defer cancel()
	won := waitingCandidate(t, ctx, path, 15*time.Second, 50*time.Millisecond)
	r := <-won
	require.ErrorIs(t, r.err, context.DeadlineExceeded, "a stopped holder must not be taken over before its TTL")
	requireHeld(t, openPath(t, path), "job", "other")

	won = waitingCandidate(t, bg(t), path, 15*time.Second, 10*time.Second)
	start := time.Now()
	h.signal(t, syscall.SIGKILL)
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
	h.stop(t)

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
	assert.Greater(t, term.Token(), h.token)
	require.NoError(t, term.Resign(bg(t)))
}

// TestProcessTerminated: a holder process that gets SIGTERM resigns and
// closes its store; the waiting candidate leads within milliseconds.
func TestProcessTerminated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leases.db")
	h := startHolder(t, path, 15*time.Second)
	won := waitingCandidate(t, bg(t), path, 15*time.Second, 10*time.Second)

	start := time.Now()
	h.signal(t, syscall.SIGTERM)
	r := requireWon(t, won, 5*time.Second)
	took := r.at.Sub(start)
	t.Logf("SIGTERM → new leader: %v", took)
	assert.Less(t, took, deathBound)
	require.NoError(t, r.term.Resign(bg(t)))
	require.NoError(t, h.cmd.Wait(), "the holder exits cleanly; stderr:\n%s", h.stderr.String())
}
