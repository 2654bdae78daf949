package helperproc

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// holderMain is the mode holder: it opens the SQLite file -db, campaigns
// for the lease -lease with TTL -ttl as <-holder>-<pid>, prints one line
// once it leads,
//
//	leading <token>
//
// and holds the term, renewing it, until SIGTERM (then it resigns, closes
// the store and exits 0) or until its stdin closes (the test ended: it
// abandons the term). SIGKILL is the crash that its tests measure.
func holderMain(args []string) error {
	fs := flag.NewFlagSet("holder", flag.ContinueOnError)
	db := fs.String("db", "", "SQLite file")
	lease := fs.String("lease", "job", "lease name")
	ttl := fs.Duration("ttl", elector.DefaultTTL, "lease TTL")
	holder := fs.String("holder", "holder", "holder name, before -<pid>")
	if err := fs.Parse(args); err != nil {
		return err
	}
	slog.SetDefault(slog.New(slog.DiscardHandler))
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)

	s, err := sqlitelease.Open(*db)
	if err != nil {
		return err
	}
	e, err := elector.New(s, *lease, elector.Config{TTL: *ttl, Holder: fmt.Sprintf("%s-%d", *holder, os.Getpid())})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	term, err := e.Campaign(ctx)
	if err != nil {
		return err
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
			return err
		}
		return s.Close()
	case <-eof:
		term.Abandon()
		return s.Close()
	}
}

// Holder is a running helper in mode holder.
type Holder struct {
	Cmd   *exec.Cmd
	Token uint64 // of the term it leads

	stdin  io.WriteCloser
	stderr bytes.Buffer // read only after it exited
	waited bool
	err    error
}

// StartHolder starts a helper in mode holder on the SQLite file path, for
// lease with ttl, named after holder, and returns once it leads. The
// cleanup of tb kills it if it still runs, and waits for it.
func StartHolder(tb testing.TB, path, lease, holder string, ttl time.Duration) *Holder {
	tb.Helper()
	h := &Holder{Cmd: Command(tb, "holder", "-db", path, "-lease", lease, "-holder", holder, "-ttl", ttl.String())}
	h.Cmd.Stderr = &h.stderr
	var err error
	if h.stdin, err = h.Cmd.StdinPipe(); err != nil {
		tb.Fatal(err)
	}
	stdout, err := h.Cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := h.Cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(h.Stop)
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if _, err := fmt.Sscanf(l, "leading %d\n", &h.Token); err != nil {
			h.Stop()
			tb.Fatalf("the holder process printed %q (%v); its stderr:\n%s", l, err, h.Stderr())
		}
	case <-time.After(30 * time.Second):
		h.Stop()
		tb.Fatalf("the holder process did not lead within 30s; its stderr:\n%s", h.Stderr())
	}
	return h
}

// Wait closes the holder's stdin (it abandons its term and exits, unless a
// signal ended it first) and waits for it to exit, once; it returns the
// exit's error.
func (h *Holder) Wait() error {
	if !h.waited {
		h.waited = true
		_ = h.stdin.Close()
		h.err = h.Cmd.Wait()
	}
	return h.err
}

// Stop kills the holder if it still runs and waits for it.
func (h *Holder) Stop() {
	if !h.waited {
		_ = h.Cmd.Process.Kill()
	}
	_ = h.Wait()
}

// Stderr returns what the holder wrote to stderr; call it once it exited.
func (h *Holder) Stderr() string { return h.stderr.String() }
