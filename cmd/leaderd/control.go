package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leaderaware/leaderaware/fxmodule"
)

// The control socket: `leaderd drain` and `leaderd resume` talk to a
// running daemon through a Unix socket that only its user can open, never
// through the HTTP port, which has no authentication. One command per
// connection: a line "drain" or "resume", answered with one line, "ok ..."
// or "error: ...".

// drainTimeout bounds one drain: by then every job has stopped (each
// within its stop timeout) and its lease gone to another member.
const drainTimeout = time.Minute

// controlPath returns the default control socket of the daemon of pid:
// leaderd-PID.sock in os.TempDir().
func controlPath(pid int) string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("leaderd-%d.sock", pid))
}

// control serves the control socket of a daemon and drains it on SIGUSR1.
// Close stops it and waits for every goroutine it started.
type control struct {
	ln     *net.UnixListener
	path   string
	reg    *fxmodule.Registry
	log    *slog.Logger
	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// listenControl creates the control socket at path with mode 0600 and
// serves it: the socket is made in a fresh directory of mode 0700 next to
// path and renamed into place, so no other user can connect to it before
// its mode is set. It refuses a path where a daemon answers already.
func listenControl(path string, reg *fxmodule.Registry, log *slog.Logger) (*control, error) {
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("leaderd: -control %s: another leaderd listens there; give this one another -control path", path)
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), ".leaderd-control-")
	if err != nil {
		return nil, fmt.Errorf("leaderd: -control %s: %w", path, err)
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("leaderd: -control %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false) // it is renamed; Close removes path
	if err = os.Chmod(tmp, 0o600); err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("leaderd: -control %s: %w", path, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &control{ln: ln, path: path, reg: reg, log: log, ctx: ctx, cancel: cancel}
	c.wg.Go(c.serve)
	return c, nil
}

// serve accepts connections until Close.
func (c *control) serve() {
	for {
		conn, err := c.ln.Accept()
		if err != nil {
			return // closed
		}
		c.wg.Go(func() { c.handle(conn) })
	}
}

// handle runs the command of one connection and answers it.
func (c *control) handle(conn net.Conn) {
	defer conn.Close()
	stop := context.AfterFunc(c.ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(io.LimitReader(conn, 64)).ReadString('\n')
	if err != nil {
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	var reply string
	switch cmd := strings.TrimSpace(line); cmd {
	case "drain":
		if err := c.drain("leaderd drain"); err != nil {
			reply = "error: " + err.Error()
		} else {
			reply = "ok: drained; this instance holds no lease and takes none until `leaderd resume` or a restart"
		}
	case "resume":
		c.reg.Resume()
		c.log.Info("leaderd resumed", "by", "leaderd resume")
		reply = "ok: resumed; this instance campaigns again"
	default:
		reply = fmt.Sprintf("error: unknown command %q (drain or resume)", cmd)
	}
	_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintln(conn, reply)
}

// drain drains the daemon, bounded by drainTimeout and by Close, and logs
// it, naming what asked for it (by).
func (c *control) drain(by string) error {
	c.log.Info("leaderd draining", "by", by)
	ctx, cancel := context.WithTimeout(c.ctx, drainTimeout)
	defer cancel()
	start := time.Now()
	if err := c.reg.Drain(ctx); err != nil {
		c.log.Warn("leaderd drain failed", "by", by, "err", err)
		return err
	}
	c.log.Info("leaderd drained", "by", by, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// drainAsync drains the daemon on a goroutine of c (a signal handler must
// not wait), unless c is closed.
func (c *control) drainAsync(by string) {
	if c.ctx.Err() != nil {
		return
	}
	c.wg.Go(func() { _ = c.drain(by) })
}

// Close stops serving, ends a drain in progress, waits for them, and
// removes the socket.
func (c *control) Close() {
	c.cancel()
	c.ln.Close()
	c.wg.Wait()
	os.Remove(c.path)
}

// controlUsage is the top of `leaderd drain -h` and `leaderd resume -h`.
const controlUsage = `Usage: leaderd drain [-pid N | -control path]
       leaderd resume [-pid N | -control path]

drain makes a running leaderd give every lease it holds to the other
members of its group, at once, and take none until resume (or its restart):
each job stops there and starts on another instance. It returns once the
instance holds no lease. resume lets it campaign again. Both talk to the
daemon's control socket, a Unix socket only its user can open (mode 0600;
by default leaderd-PID.sock in the temporary directory), never to its HTTP
port. kill -USR1 PID drains it too.

Without -pid or -control, they talk to the only leaderd of this user that
has a socket in the temporary directory.

Flags:
`

// controlCommand runs `leaderd drain` or `leaderd resume` (cmd) with args,
// printing the daemon's answer to stdout.
func controlCommand(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("leaderd "+cmd, flag.ContinueOnError)
	pid := fs.Int("pid", 0, "`pid` of the leaderd to "+cmd+" (its socket is leaderd-PID.sock in the temporary directory)")
	path := fs.String("control", "", "`path` of the control socket of the leaderd to "+cmd+" (its -control)")
	if err := parse(fs, controlUsage, args, stdout, stderr); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &flagError{err: fmt.Errorf("leaderd %s: unexpected argument %q", cmd, fs.Arg(0))}
	}
	if *pid != 0 && *path != "" {
		return &flagError{err: fmt.Errorf("leaderd %s: give -pid or -control, not both", cmd)}
	}
	sock := *path
	switch {
	case *pid < 0:
		return &flagError{err: fmt.Errorf("leaderd %s: -pid %d is not a process id", cmd, *pid)}
	case *pid > 0:
		sock = controlPath(*pid)
	case sock == "":
		var err error
		if sock, err = onlySocket(); err != nil {
			return fmt.Errorf("leaderd %s: %w", cmd, err)
		}
	}
	reply, err := sendControl(ctx, sock, cmd)
	if err != nil {
		return fmt.Errorf("leaderd %s: %w", cmd, err)
	}
	if msg, ok := strings.CutPrefix(reply, "error: "); ok {
		return fmt.Errorf("leaderd %s: %s: %s", cmd, sock, msg)
	}
	fmt.Fprintln(stdout, reply)
	return nil
}

// onlySocket returns the control socket of the only leaderd that has one
// in os.TempDir() and answers on it.
func onlySocket() (string, error) {
	paths, _ := filepath.Glob(filepath.Join(os.TempDir(), "leaderd-*.sock"))
	var live []string
	for _, p := range paths {
		if ownSocket(p) != nil {
			continue // another user's, or not a socket: not a leaderd of ours
		}
		if c, err := net.DialTimeout("unix", p, time.Second); err == nil {
			c.Close()
			live = append(live, p)
		}
	}
	switch len(live) {
	case 0:
		return "", fmt.Errorf("no running leaderd has a control socket in %s; give -pid or -control", os.TempDir())
	case 1:
		return live[0], nil
	}
	pids := make([]string, len(live))
	for i, p := range live {
		pids[i] = strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "leaderd-"), ".sock")
	}
	return "", fmt.Errorf("several leaderd run (pids %s); give -pid", strings.Join(pids, ", "))
}

// ownSocket returns nil if path is a Unix socket of this process's user,
// itself and not a symlink: the temporary directory is shared, so a socket
// of another user there could take a command and answer it falsely.
func ownSocket(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symlink; give the path of the socket itself", path)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s is not a socket (mode %v)", path, fi.Mode())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%s belongs to uid %d, not to this user (uid %d); run it as the daemon's user", path, st.Uid, os.Getuid())
	}
	return nil
}

// sendControl sends cmd to the control socket at path, which must be one
// of this user's, and returns its answer, bounded by drainTimeout and a
// little more.
func sendControl(ctx context.Context, path, cmd string) (string, error) {
	if err := ownSocket(path); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, drainTimeout+10*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	if _, err := fmt.Fprintln(conn, cmd); err != nil {
		return "", err
	}
	reply, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("%s closed the connection without an answer", path)
		}
		return "", err
	}
	return strings.TrimSpace(reply), nil
}
