// Command leaderd is the leaderaware demo: an fx app that runs three
// background jobs (price refresh, webhook retry, airdrop expiry), each on
// exactly one of the instances that share one SQLite file (-db, one host)
// or, for many hosts, one PostgreSQL database (-pg), etcd cluster (-etcd)
// or MySQL database (-mysql). Run it in several terminals on the same store;
// each job runs in one of them, and when you stop that one (Ctrl-C), its
// jobs move to another within about a second. Every instance prints one
// line per leadership transition, and the leader of a job one line per
// pass, with its fencing token. On etcd and MySQL, whose databases the
// reference jobs' SQL does not speak, each job is a periodic fenced pass.
//
//	leaderd [-db leaderaware.db | -pg DSN | -etcd host:2379,... | -mysql DSN]
//	        [-http :8080] [-holder name] [-ttl 3s] [-renew 1s] [-retry 1s] [-interval 5s]
//	        [-price-url URL] [-webhook-url URL] [-secret key]
//	leaderd status [-db leaderaware.db | -pg DSN | -etcd host:2379,... | -mysql DSN] [-json]
//	leaderd drain [-pid N | -control path]
//	leaderd resume [-pid N | -control path]
//
// With -http, an instance serves a status page of the leases at /, the
// same as JSON at /leases, Prometheus metrics at /metrics, and the probes
// /healthz and /readyz.
//
// status prints the lease table: which instance holds which job, with its
// fencing token and version, when it last renewed the lease and when the
// lease expires, who waits for it, and the members of the group, the
// instances that balance the jobs among them; `leaderd -h` explains the
// columns.
//
// The instances spread the jobs among them (-no-balance turns it off).
// drain (or kill -USR1 PID) makes a running instance hand every job it
// leads to the others, through its control socket, a Unix socket of mode
// 0600 (never its HTTP port); resume ends that. Ctrl-C drains first too.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"reflect"
	"slices"
	"strings"
	"syscall"

	"go.uber.org/fx"

	"github.com/leaderaware/leaderaware/fxmodule"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stderr, os.Stdout))
}

// run runs leaderd with args until ctx ends or SIGINT/SIGTERM arrives, and
// returns the exit code: 0, 1 if the app failed, 2 for bad flags. Logs and
// errors go to stderr; the status table, and the usage when asked for with
// -h, to stdout.
func run(ctx context.Context, args []string, stderr, stdout io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "status":
			return exitCode(stderr, status(ctx, args[1:], stdout, stderr))
		case "drain", "resume":
			return exitCode(stderr, controlCommand(ctx, args[0], args[1:], stdout, stderr))
		}
	}
	o, err := parseFlags(args, stdout, stderr)
	if err != nil {
		return exitCode(stderr, err)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if err := serve(ctx, o, log); err != nil {
		log.Error("leaderd stopped", "err", err)
		return 1
	}
	return 0
}

// exitCode prints err (unless the flag package did) and returns the exit
// code for it: 0 for nil and -h, 2 for bad flags, 1 otherwise.
func exitCode(stderr io.Writer, err error) int {
	var fe *flagError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &fe):
		if !fe.printed {
			fmt.Fprintln(stderr, err)
		}
		return 2
	default:
		fmt.Fprintln(stderr, err)
		return 1
	}
}

// serve runs the daemon's app until ctx ends or a signal arrives, then
// stops it gracefully: it drains first (each job stops, and its lease goes
// to another member at once), then stops. While it runs, it serves its
// control socket (see [listenControl]), and drains on SIGUSR1. If the app
// cannot be built or started, it returns the cause alone (see [cause]).
func serve(ctx context.Context, o options, log *slog.Logger, extra ...fx.Option) error {
	// Before anything starts: SIGUSR1 would otherwise end the process.
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	var store closingStore
	if !o.referenceJobs() {
		s, err := openStore(ctx, o, log)
		if err != nil {
			return fmt.Errorf("leaderd: lease store: %w", err)
		}
		defer s.Close()
		store = s
	}
	var reg *fxmodule.Registry
	app := newApp(o, store, log, append(slices.Clip(extra), fx.Populate(&reg))...)
	if err := app.Err(); err != nil {
		return cause(err)
	}
	startCtx, cancel := context.WithTimeout(ctx, app.StartTimeout())
	defer cancel()
	if err := app.Start(startCtx); err != nil {
		return cause(err)
	}
	stopCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), app.StopTimeout())
	}
	ctl, err := listenControl(o.controlPath(), reg, log)
	if err != nil {
		sctx, cancel := stopCtx()
		defer cancel()
		return errors.Join(err, app.Stop(sctx))
	}
	log.Info("leaderd running", "holder", o.holder, o.store(), o.target(), "control", ctl.path)
	done := app.Wait()
wait:
	for {
		select {
		case sig := <-done:
			log.Info("leaderd stopping", "signal", sig.Signal)
			break wait
		case <-ctx.Done():
			log.Info("leaderd stopping")
			break wait
		case <-usr1:
			ctl.drainAsync("SIGUSR1")
		}
	}
	ctl.Close()
	sctx, cancel := stopCtx()
	defer cancel()
	return app.Stop(sctx)
}

// cause returns the first error in err's chain that fx or dig did not make:
// the error a constructor or hook returned, without the description of the
// dependency graph around it, which can run to kilobytes.
func cause(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		t := reflect.TypeOf(e)
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if p := t.PkgPath(); !strings.HasPrefix(p, "go.uber.org/fx") && !strings.HasPrefix(p, "go.uber.org/dig") {
			return e
		}
	}
	return err
}
