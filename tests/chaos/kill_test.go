//go:build linux

package chaos

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestKillDatedBeforeDeath: a killed process's job ends, for the checks, no
// later than the first moment another process can know it is dead. The
// test kills the way a loaded machine may schedule it: the thread that
// sends SIGKILL has the lowest priority (SCHED_IDLE) on CPU 0, where the
// victim and a watcher of its stdout run too, so the victim dies, and the
// watcher (woken by the end of its stdout, as a candidate is by its freed
// lock) dates the death, before the sender runs again. A takeover then
// comes after the death, and must not look earlier than the kill.
func TestKillDatedBeforeDeath(t *testing.T) {
	for i := range 10 {
		victim, dead := killRace(t)
		if victim.killedAt.After(dead) {
			t.Fatalf("round %d: the kill is dated %s, %v after the watcher saw the victim dead (%s)",
				i, victim.killedAt.Format(timeFormat+"000"), victim.killedAt.Sub(dead), dead.Format(timeFormat+"000"))
		}
	}
}

// killRace kills a victim with cluster.kill from a SCHED_IDLE thread on CPU
// 0, and returns the victim and the time a watcher thread on CPU 0 saw the
// victim's stdout end. It skips t where it cannot set the CPU or the
// policy.
func killRace(t *testing.T) (*proc, time.Time) {
	t.Helper()
	c := &cluster{t: t, rnd: rand.New(rand.NewPCG(1, 2)), stopAt: map[string]time.Time{}}
	var fds [2]int // blocking, so that the watcher waits in read(2) itself
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	w := os.NewFile(uintptr(fds[1]), "victim stdout")
	victim := &proc{holder: "victim", cmd: exec.Command("sleep", "60"), exited: make(chan struct{})}
	victim.cmd.Stdout = w

	// Each thread stays locked: it ends with its goroutine, policy and all.
	onCPU0 := func() error {
		runtime.LockOSThread()
		var cpu0 unix.CPUSet
		cpu0.Set(0)
		return unix.SchedSetaffinity(0, &cpu0)
	}
	watching := make(chan error, 1)
	dead := make(chan time.Time, 1)
	go func() {
		if err := onCPU0(); err != nil {
			watching <- err
			return
		}
		watching <- nil
		var b [64]byte
		for {
			n, err := syscall.Read(fds[0], b[:])
			if n <= 0 && err != syscall.EINTR {
				break
			}
		}
		dead <- time.Now()
	}()
	if err := <-watching; err != nil {
		w.Close()
		t.Skipf("cannot run the race (%v)", err)
	}
	killed := make(chan error, 1)
	go func() {
		if err := onCPU0(); err != nil {
			killed <- err
			return
		}
		// Started from this thread, the victim runs on CPU 0 too, at the
		// ordinary policy.
		err := victim.cmd.Start()
		w.Close()
		if err != nil {
			killed <- err
			return
		}
		idle := unix.SchedAttr{Size: uint32(unsafe.Sizeof(unix.SchedAttr{})), Policy: unix.SCHED_IDLE}
		if err := unix.SchedSetAttr(0, &idle, 0); err != nil {
			killed <- err
			return
		}
		c.kill(victim)
		killed <- nil
	}()
	err := <-killed
	if victim.cmd.Process != nil {
		_ = victim.cmd.Process.Kill()
		_ = victim.cmd.Wait()
	}
	if err != nil {
		t.Skipf("cannot run the race (%v)", err)
	}
	return victim, <-dead
}
