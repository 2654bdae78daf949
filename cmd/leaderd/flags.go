package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
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
	etcd       []string      // -etcd: the etcd endpoints instead of -db; nil means none
	mysql      string        // -mysql: the MySQL or MariaDB DSN instead of -db; "" means none
	k8s        string        // -k8s: the Kubernetes namespace of the Lease objects instead of -db; "" means none
	kubeconfig string        // -kubeconfig: the kubeconfig of -k8s; "" means the in-cluster config
	http       string        // -http: the address of the status page, /metrics and probes; "" means none
	holder     string        // -holder: this instance's holder name
	ttl        time.Duration // -ttl
	renew      time.Duration // -renew
	retry      time.Duration // -retry
	interval   time.Duration // -interval: how often each job runs
	priceURL   string        // -price-url: HTTP price source; "" means simulated
	webhookURL string        // -webhook-url: where to enqueue demo webhooks; "" means none
	secret     string        // -secret: HMAC key of the webhook signatures
	noBalance  bool          // -no-balance: first come, first served, instead of spreading the jobs
	control    string        // -control: the path of the control socket; "" means controlPath(pid)
}

// controlPath returns the path of o's control socket.
func (o options) controlPath() string {
	if o.control != "" {
		return o.control
	}
	return controlPath(os.Getpid())
}

// The stores, as [options.store] names them.
const (
	storeSQLite   = "sqlite"
	storePostgres = "postgres"
	storeEtcd     = "etcd"
	storeMySQL    = "mysql"
	storeK8s      = "k8s"
)

// store names the store that o keeps the leases in.
func (o options) store() string {
	switch {
	case o.pg != "":
		return storePostgres
	case len(o.etcd) > 0:
		return storeEtcd
	case o.mysql != "":
		return storeMySQL
	case o.k8s != "":
		return storeK8s
	}
	return storeSQLite
}

// referenceJobs reports whether o runs the reference jobs, whose SQL
// SQLite and PostgreSQL speak; on etcd and MySQL the demo runs ticks
// instead (see [tickJobs]).
func (o options) referenceJobs() bool {
	s := o.store()
	return s == storeSQLite || s == storePostgres
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
       leaderd status [-db file | -pg DSN | -etcd endpoints | -mysql DSN | -k8s namespace] [-json]
       leaderd drain [-pid N | -control path]
       leaderd resume [-pid N | -control path]

Runs three demo jobs (price-refresh, webhook-retry, airdrop-expiry), each on
exactly one of the instances that share the -db file (one host) or the -pg,
-etcd, -mysql or -k8s store (many hosts). Each instance logs when it is elected or
demoted for a job, and the leader of a job logs one line per pass, with the
fencing token of its term. Stop an instance with Ctrl-C: its jobs move to
another at once.

The instances spread the jobs among them: each leads about as many as the
others (three jobs on three instances: one each), and a new instance takes
its share from the busiest. Each instance keeps a membership seat, a lease
of its own, in the store. -no-balance turns that off.

Drain an instance before maintenance with leaderd drain (-pid N, or
-control path), or kill -USR1 PID: it hands every job it leads to the
others at once and takes none until leaderd resume or its restart. Both
talk to the instance's control socket, a Unix socket of mode 0600 that only
its user can open (-control, by default leaderd-PID.sock in the temporary
directory), never to the HTTP port, which has no authentication. Ctrl-C
drains first too.

On -db and -pg the jobs are the reference jobs, which keep their tables in
the same database. Their SQL speaks SQLite and PostgreSQL only, so on -etcd,
-mysql and -k8s each of the three leases runs a simpler job instead: every
-interval it checks its term with an empty fenced transaction and logs the
pass with its token (-price-url and -webhook-url need the reference jobs).

With -http ADDR (such as -http :8080), the instance serves a status page at
/ (every lease, its holder and token, the jobs waiting for it here, and the
handoffs seen through the store), its JSON at /leases, Prometheus metrics at
/metrics, and the liveness and readiness probes /healthz and /readyz.

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

Then one row per member of the group, the instances that spread the jobs
among them (each keeps a membership seat, a lease of its own, in the store;
a stopped or drained instance frees it, and one whose seat expired is not
listed):

  MEMBER     the instance's holder name
  GROUP      the group: the instances that run the same jobs in one store
  SINCE      how long ago it joined
  LEADS      the jobs it leads
  WAITS FOR  the jobs it would take over: those that another member leads,
             and the free ones

RENEWED and EXPIRES compare the clock of the host that wrote the lease with
this one, for display only: no instance ever decides by them. etcd and MySQL
tell nothing of a free lease: its HOLDER, TOKEN and VERSION are "-". With
-json, status prints the leases, each with the members that wait for it,
and the members as the status page's JSON (/leases) lists them.
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
	fs.String("etcd", "", "comma-separated etcd `endpoints` (host:port or https://host:port) for the leases, instead of -db;\n"+
		"the jobs are then the simpler fenced passes described above")
	fs.StringVar(&o.mysql, "mysql", "", "MySQL or MariaDB `DSN` for the leases, instead of -db, such as user:password@tcp(host:3306)/db;\n"+
		"the jobs are then the simpler fenced passes described above")
	k8sFlags(fs, &o)
	fs.StringVar(&o.http, "http", "", "`address` to serve the status page, /leases, /metrics, /healthz and /readyz on, such as :8080 (default: none)")
	fs.StringVar(&o.holder, "holder", defaultHolder(), "holder `name` of this instance in the lease table; unique per instance")
	fs.DurationVar(&o.ttl, "ttl", defaultTTL, "lease TTL: a killed leader is replaced within ttl + retry")
	fs.DurationVar(&o.renew, "renew", defaultRenew, "how often the leader renews its leases; at most (ttl - ttl/10) / 2")
	fs.DurationVar(&o.retry, "retry", defaultRetry, "how often a follower reads a held lease to see whether its leader still renews it")
	fs.DurationVar(&o.interval, "interval", defaultInterval, "how often each job runs while leading")
	fs.StringVar(&o.priceURL, "price-url", "", "http(s) `URL` of a JSON price source (default: simulated prices)")
	fs.StringVar(&o.webhookURL, "webhook-url", "", "http(s) `URL` to enqueue a demo webhook to every interval (default: none)")
	fs.StringVar(&o.secret, "secret", defaultSecret, "HMAC-SHA256 `key` of the webhook signatures")
	fs.BoolVar(&o.noBalance, "no-balance", false, "do not spread the jobs over the instances: each goes to the first that asks, as without placement")
	fs.StringVar(&o.control, "control", "", "`path` of the control socket that leaderd drain and resume talk to, created with mode 0600\n"+
		"(default: leaderd-PID.sock in the temporary directory)")
	err := parse(fs, usage, args, stdout, stderr)
	if err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, &flagError{err: fmt.Errorf("leaderd: unexpected argument %q (the subcommands are status, drain and resume)", fs.Arg(0))}
	}
	if err := oneStore(fs); err != nil {
		return o, err
	}
	if o.etcd, err = endpoints(fs); err != nil {
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

// storeFlags are the flags that name a store, as errors name them.
var storeFlags = []struct{ name, label string }{
	{"db", "-db (SQLite)"},
	{"pg", "-pg (PostgreSQL)"},
	{"etcd", "-etcd"},
	{"mysql", "-mysql (MySQL)"},
	{"k8s", "-k8s (Kubernetes)"},
}

// oneStore returns a *flagError if fs was given more than one of -db, -pg,
// -etcd, -mysql and -k8s, or one of them empty.
func oneStore(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var given []string
	for _, f := range storeFlags {
		if !set[f.name] {
			continue
		}
		given = append(given, f.label)
		if fs.Lookup(f.name).Value.String() == "" {
			return &flagError{err: fmt.Errorf("%s: -%s is empty", fs.Name(), f.name)}
		}
	}
	switch len(given) {
	case 0, 1:
		return nil
	case 2:
		return &flagError{err: fmt.Errorf("%s: give %s or %s, not both", fs.Name(), given[0], given[1])}
	}
	return &flagError{err: fmt.Errorf("%s: give one store of %s", fs.Name(), strings.Join(given, ", "))}
}

// endpoints returns the comma-separated endpoints of fs's -etcd flag (nil
// if it is empty), or a *flagError if it has commas but no endpoint.
func endpoints(fs *flag.FlagSet) ([]string, error) {
	raw := fs.Lookup("etcd").Value.String()
	var eps []string
	for e := range strings.SplitSeq(raw, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	if raw != "" && len(eps) == 0 {
		return nil, &flagError{err: fmt.Errorf("%s: -etcd %q names no endpoint; give host:port[,host:port...]", fs.Name(), raw)}
	}
	return eps, nil
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
	if !o.referenceJobs() {
		for _, f := range []struct{ name, value string }{{"-price-url", o.priceURL}, {"-webhook-url", o.webhookURL}} {
			if f.value != "" {
				return fmt.Errorf("leaderd: %s needs the reference jobs, which run on -db and -pg only; on -%s the jobs are simple fenced passes", f.name, o.store())
			}
		}
	}
	if o.kubeconfig != "" && o.k8s == "" {
		return fmt.Errorf("leaderd: -kubeconfig %q is for -k8s; give -k8s NAMESPACE too", o.kubeconfig)
	}
	if o.http != "" {
		if _, _, err := net.SplitHostPort(o.http); err != nil {
			return fmt.Errorf("leaderd: -http %q: %w (give host:port or :port)", o.http, err)
		}
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
