//go:build linux

package etcdlease

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/internal/testing/helperproc"
	"github.com/leaderaware/leaderaware/internal/testing/storebench"
)

// BenchmarkClientCPU measures the client CPU of 1,000 leases held by one
// Store and campaigned for by another, at the default timings (see
// storebench.ClientCPU). The etcd member runs in a child process, so that
// this process's CPU time is the clients' alone; server-%core is the
// member's.
//
//	go test -run '^$' -bench ClientCPU ./
func BenchmarkClientCPU(b *testing.B) {
	endpoint, serverCPU := startEtcdProcess(b)
	prefix := uniquePrefix()
	open := func() *Store {
		s, err := Open(context.Background(), []string{endpoint}, WithPrefix(prefix))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}
	storebench.ClientCPU(b, open(), open(), serverCPU)
}

// startEtcdProcess runs an etcd member in a child process (see etcdMain),
// which the cleanup stops, and returns its endpoint and a function that
// returns the CPU time it has used so far.
func startEtcdProcess(tb testing.TB) (string, func() time.Duration) {
	tb.Helper()
	cmd := helperproc.Command(tb, "etcd")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if ep, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
				ready <- ep
			}
		}
	}()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	var endpoint string
	select {
	case endpoint = <-ready:
	case <-time.After(30 * time.Second):
		tb.Fatal("the etcd child process was not ready within 30s")
	}
	pid := cmd.Process.Pid
	return endpoint, func() time.Duration {
		d, err := cpuOf(pid)
		if err != nil {
			tb.Fatal(err)
		}
		return d
	}
}

// cpuOf returns the user and system CPU time of process pid so far, from
// /proc/<pid>/stat (in clock ticks of 10ms, Linux's USER_HZ).
func cpuOf(pid int) (time.Duration, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(stat), ')') // after the command name, which may hold anything
	f := strings.Fields(string(stat[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, stat)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, stat)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}
