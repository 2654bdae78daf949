package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// Defaults of the flags. The timings are short so that the demo hands jobs
// off quickly: a stopped leader's jobs move at once, a killed one's within
// TTL + retry.
const (
	defaultDB       = "leaderaware.db"
	defaultTTL      = 3 * time.Second
	defaultRenew    = time.Second
	defaultRetry    = time.Second
	defaultInterval = 5 * time.Second
	defaultSecret   = "leaderd-demo-secret"
)

// options are the parsed, validated flags of the daemon.
type options struct {
	db         string        // -db: the SQLite file of leases and job data
	pg         string        // -pg: the PostgreSQL DSN instead of -db; "" means SQLite
	holder     string        // -holder: this instance's holder name
	ttl        time.Duration // -ttl
	renew      time.Duration // -renew
	retry      time.Duration // -retry
	interval   time.Duration // -interval: how often each job runs
	priceURL   string        // -price-url: HTTP price source; "" means simulated
	webhookURL string        // -webhook-url: where to enqueue demo webhooks; "" means none
	secret     string        // -secret: HMAC key of the webhook signatures
}

// electorConfig returns the elector timings and holder of o.
func (o options) electorConfig() elector.Config {
	return elector.Config{TTL: o.ttl, RenewInterval: o.renew, RetryInterval: o.retry, Holder: o.holder}
}

// defaultHolder returns host-pid, the default holder name: unique among
// the processes of a host, and stable for the life of the process.
func defaultHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// usage is the top of `leaderd -h`; the flags follow it.
const usage = `Usage: leaderd [flags]
       leaderd status [-db file | -pg DSN]

Runs three demo jobs (price-refresh, webhook-retry, airdrop-expiry), each on
exactly one of the instances that share the -db file (one host) or the -pg
database (many hosts). Each instance logs when it is elected or demoted for a
job, and the leader of a job logs one line per pass, with the fencing token of
its term. Stop an instance with Ctrl-C: its jobs move to another at once.

` + statusHelp + `
Flags:
`

// statusHelp explains the table of leaderd status.
const statusHelp = `leaderd status prints who leads which job, one row per lease:

  JOB      the job's lease name
  HOLDER   the instance that holds the lease (its -holder); if FREE, the last one
  TOKEN    the fencing token of the holder's term: every new term gets a larger
           one, and the jobs' writes carry it
  VERSION  grows with every write to the lease (acquire, renew, release)
  RENEWED  how long ago the holder last wrote the lease ("-" if free)
  EXPIRES  when the lease runs out unless the holder renews it: "in 2s" while
           it renews; "3s ago" once it stopped renewing (it died or froze), and
           another instance takes over after watching the lease for its TTL;
           "free" once the holder released it, and the next instance takes it
           at once

RENEWED and EXPIRES compare the clock of the host that wrote the lease with
this one, for display only: no instance ever decides by them.
`

// parseFlags parses and validates the daemon's flags. Usage and flag
// package errors go to stderr; -h gives the usage on stdout, and
// flag.ErrHelp. Errors name the flag and the bad value.
func parseFlags(args []string, stdout, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("leaderd", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.db, "db", defaultDB, "SQLite `file` for the leases and the jobs' tables; every instance on the host must use the same one")
	fs.StringVar(&o.pg, "pg", "", "PostgreSQL `DSN` for the leases and the jobs' tables, instead of -db, such as\n"+
		"postgres://user@host:5432/db; add search_path=NAME to keep them in schema NAME")
	fs.StringVar(&o.holder, "holder", defaultHolder(), "holder `name` of this instance in the lease table; unique per instance")
	fs.DurationVar(&o.ttl, "ttl", defaultTTL, "lease TTL: a killed leader is replaced within ttl + retry")
	fs.DurationVar(&o.renew, "renew", defaultRenew, "how often the leader renews its leases; at most (ttl - ttl/10) / 2")
	fs.DurationVar(&o.retry, "retry", defaultRetry, "how often a follower reads a held lease to see whether its leader still renews it")
	fs.DurationVar(&o.interval, "interval", defaultInterval, "how often each job runs while leading")
	fs.StringVar(&o.priceURL, "price-url", "", "http(s) `URL` of a JSON price source (default: simulated prices)")
	fs.StringVar(&o.webhookURL, "webhook-url", "", "http(s) `URL` to enqueue a demo webhook to every interval (default: none)")
	fs.StringVar(&o.secret, "secret", defaultSecret, "HMAC-SHA256 `key` of the webhook signatures")
	if err := parse(fs, usage, args, stdout, stderr); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, &flagError{err: fmt.Errorf("leaderd: unexpected argument %q (the only subcommand is status)", fs.Arg(0))}
	}
	if err := oneStore(fs); err != nil {
		return o, err
	}
	if err := o.validate(); err != nil {
		return o, &flagError{err: err}
	}
	return o, nil
}

// parse parses args with fs. Asked for help, it prints top and the flags
// to stdout and returns flag.ErrHelp; for a bad flag, it prints the error,
// top and the flags to stderr and returns a *flagError.
func parse(fs *flag.FlagSet, top string, args []string, stdout, stderr io.Writer) error {
	var out bytes.Buffer
	fs.SetOutput(&out)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), top)
		fs.PrintDefaults()
	}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		_, _ = out.WriteTo(stdout)
		return err
	case err != nil:
		_, _ = out.WriteTo(stderr)
		return &flagError{err: err, printed: true}
	}
	return nil
}

// oneStore returns a *flagError if fs was given both -db and -pg.
func oneStore(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["db"] && set["pg"] {
		return &flagError{err: fmt.Errorf("%s: give -db (SQLite) or -pg (PostgreSQL), not both", fs.Name())}
	}
	return nil
}

// flagError is a bad command line. printed says that the flag package has
// printed it already, with the usage.
type flagError struct {
	err     error
	printed bool
}

func (e *flagError) Error() string { return e.err.Error() }
func (e *flagError) Unwrap() error { return e.err }

// validate returns an error naming the first bad flag value of o.
func (o options) validate() error {
	if o.db == "" && o.pg == "" {
		return errors.New("leaderd: -db is empty")
	}
	if err := elector.ValidateHolder(o.holder); err != nil {
		return fmt.Errorf("leaderd: -holder: %w", err)
	}
	if err := o.electorConfig().Validate(); err != nil {
		return fmt.Errorf("leaderd: -ttl %v, -renew %v, -retry %v: %w", o.ttl, o.renew, o.retry, err)
	}
	if o.interval <= 0 {
		return fmt.Errorf("leaderd: -interval %v must be positive", o.interval)
	}
	if err := checkURL("-price-url", o.priceURL); err != nil {
		return err
	}
	if err := checkURL("-webhook-url", o.webhookURL); err != nil {
		return err
	}
	if o.secret == "" {
		return errors.New("leaderd: -secret is empty")
	}
	return nil
}

// checkURL returns nil if raw is empty or an absolute http or https URL,
// and otherwise an error naming the flag and the value.
func checkURL(flagName, raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("leaderd: %s %q: %w", flagName, raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("leaderd: %s %q is not an absolute http or https URL", flagName, raw)
	}
	return nil
}
