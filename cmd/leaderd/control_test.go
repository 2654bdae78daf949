package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestControlRefusesSocketOfAnotherUser: `leaderd drain` never sends its
// command to, nor trusts the answer of, a socket another user made in the
// shared temporary directory (which could answer "ok: drained" for a
// daemon that was never drained, or shadow the real one).
func TestControlRefusesSocketOfAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to make a socket owned by another user")
	}
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	path := filepath.Join(dir, "leaderd-4242.sock")
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(path, 0o777))
	require.NoError(t, os.Chown(path, 65534, 65534))
	var got []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			mu.Lock()
			got = append(got, line)
			mu.Unlock()
			fmt.Fprintln(c, "ok: drained")
			c.Close()
		}
	})
	defer func() { ln.Close(); wg.Wait() }()

	for _, args := range [][]string{{"drain"}, {"drain", "-pid", "4242"}, {"drain", "-control", path}} {
		var stdout, stderr bytes.Buffer
		err := controlCommand(context.Background(), "drain", args[1:], &stdout, &stderr)
		assert.Error(t, err, "leaderd %v used a socket of uid 65534: %s", args, stdout.String())
		assert.NotContains(t, stdout.String(), "ok", "leaderd %v", args)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, got, "the commands reached a socket of another user")
}

// TestControlRefusesSymlink: `leaderd drain -control` does not follow a
// symlink at the socket's name to a socket of someone else.
func TestControlRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "other.sock")
	ln, err := net.Listen("unix", target)
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, "ok: drained")
			c.Close()
		}
	})
	defer func() { ln.Close(); wg.Wait() }()
	link := filepath.Join(dir, "leaderd-1.sock")
	require.NoError(t, os.Symlink(target, link))
	var stdout, stderr bytes.Buffer
	err = controlCommand(context.Background(), "drain", []string{"-control", link}, &stdout, &stderr)
	assert.ErrorContains(t, err, "symlink")
}
