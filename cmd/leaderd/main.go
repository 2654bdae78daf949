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
//
// With -http, an instance serves a status page of the leases at /, the
// same as JSON at /leases, Prometheus metrics at /metrics, and the probes
// /healthz and /readyz.
//
// status prints the lease table: which instance holds which job, with its
// fencing token and version, when it last renewed the lease and when the
// lease expires; `leaderd -h` explains the columns.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"

	"go.uber.org/fx"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stderr, os.Stdout))
}

// run runs leaderd with args until ctx ends or SIGINT/SIGTERM arrives, and
// returns the exit code: 0, 1 if the app failed, 2 for bad flags. Logs and
// errors go to stderr; the status table, and the usage when asked for with
// -h, to stdout.
func run(ctx context.Context, args []string, stderr, stdout io.Writer) int {
	if len(args) > 0 && args[0] == "status" {
		return exitCode(stderr, status(ctx, args[1:], stdout, stderr))
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
// stops it gracefully: each job stops, then frees its lease, so another
// instance takes over at once. If the app cannot be built or started, it
// returns the cause alone (see [cause]).
func serve(ctx context.Context, o options, log *slog.Logger, extra ...fx.Option) error {
	var store closingStore
	if !o.referenceJobs() {
		s, err := openStore(ctx, o)
		if err != nil {
			return fmt.Errorf("leaderd: lease store: %w", err)
		}
		defer s.Close()
		store = s
	}
	app := newApp(o, store, log, extra...)
	if err := app.Err(); err != nil {
		return cause(err)
	}
	startCtx, cancel := context.WithTimeout(ctx, app.StartTimeout())
	defer cancel()
	if err := app.Start(startCtx); err != nil {
		return cause(err)
	}
	log.Info("leaderd running", "holder", o.holder, o.store(), o.target())
	select {
	case sig := <-app.Wait():
		log.Info("leaderd stopping", "signal", sig.Signal)
	case <-ctx.Done():
		log.Info("leaderd stopping")
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), app.StopTimeout())
	defer cancel()
	return app.Stop(stopCtx)
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
