package pgtest

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Bouncer starts a PgBouncer of tb's own in transaction mode, with one
// server connection that every client shares, in front of the server that
// dsn names, on a free loopback port, and returns dsn
// pointed at it; the PgBouncer stops when tb ends. Without a pgbouncer
// binary it skips tb, or fails it when CI is set (.ci/run installs one).
func Bouncer(tb testing.TB, dsn string) string {
	tb.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		bin, err = exec.LookPath("/usr/sbin/pgbouncer")
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatal("CI is set but there is no pgbouncer binary: .ci/run installs it (apt-get install pgbouncer)")
		}
		tb.Skip("no pgbouncer binary (apt-get install pgbouncer) to test behind a transaction pooler")
	}
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		tb.Fatalf("pgtest: parse %s: %v", Env, err)
	}
	dir := tb.TempDir()
	var lastErr error
	for range 3 { // another process may take the free port before PgBouncer does
		port, err := freePort()
		if err != nil {
			tb.Fatalf("pgtest: find a free port: %v", err)
		}
		if lastErr = startBouncer(tb, bin, dir, cfg, port); lastErr == nil {
			return withHostPort(dsn, "127.0.0.1", port)
		}
	}
	tb.Fatalf("pgtest: start pgbouncer: %v", lastErr)
	return ""
}

// startBouncer runs bin with a configuration in dir, listening on port,
// and waits until it accepts connections. A PgBouncer that started is
// stopped and waited for when tb ends.
func startBouncer(tb testing.TB, bin, dir string, cfg *pgconn.Config, port int) error {
	ini := filepath.Join(dir, "pgbouncer.ini")
	users := filepath.Join(dir, "users.txt")
	conf := fmt.Sprintf(`[databases]
* = host=%s port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = 1
`, cfg.Host, cfg.Port, port, users)
	if err := os.WriteFile(ini, []byte(conf), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(users, fmt.Appendf(nil, "%q %q\n", cfg.User, cfg.Password), 0o644); err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(dir, "pgbouncer-"+strconv.Itoa(port)+".log"))
	if err != nil {
		return err
	}
	defer log.Close()
	args := []string{ini}
	if os.Geteuid() == 0 { // PgBouncer refuses to run as root
		args = []string{"-u", "nobody", ini}
		for _, d := range []string{dir, filepath.Dir(dir)} { // t.TempDir's are 0700
			if err := os.Chmod(d, 0o755); err != nil {
				return err
			}
		}
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for deadline := time.Now().Add(10 * time.Second); ; {
		select {
		case err := <-exited:
			out, _ := os.ReadFile(log.Name())
			return fmt.Errorf("pgbouncer exited (%v): %s", err, out)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			stop()
			return fmt.Errorf("pgbouncer does not listen on %s after 10s", addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	tb.Cleanup(func() {
		stop()
		if tb.Failed() {
			out, _ := os.ReadFile(log.Name())
			tb.Logf("pgbouncer log:\n%s", out)
		}
	})
	return nil
}

// freePort returns a TCP port on loopback that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// withHostPort returns dsn, a URL or keyword/value string, with its host
// and port replaced.
func withHostPort(dsn, host string, port int) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Host = net.JoinHostPort(host, strconv.Itoa(port))
		return u.String()
	}
	return fmt.Sprintf("%s host=%s port=%d", dsn, host, port)
}
