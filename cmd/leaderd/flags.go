package main

import (
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

// parseFlags parses and validates the daemon's flags. Usage and flag
// package errors go to stderr. Errors name the flag and the bad value;
// -h gives flag.ErrHelp.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("leaderd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.db, "db", defaultDB, "SQLite `file` for the leases and the jobs' tables; every instance on the host must use the same one")
	fs.StringVar(&o.holder, "holder", defaultHolder(), "holder `name` of this instance in the lease table; unique per instance")
	fs.DurationVar(&o.ttl, "ttl", defaultTTL, "lease TTL: a killed leader is replaced within ttl + retry")
	fs.DurationVar(&o.renew, "renew", defaultRenew, "how often the leader renews its leases; at most (ttl - ttl/10) / 2")
	fs.DurationVar(&o.retry, "retry", defaultRetry, "how often a follower reads a held lease to see whether its leader still renews it")
	fs.DurationVar(&o.interval, "interval", defaultInterval, "how often each job runs while leading")
	fs.StringVar(&o.priceURL, "price-url", "", "http(s) `URL` of a JSON price source (default: simulated prices)")
	fs.StringVar(&o.webhookURL, "webhook-url", "", "http(s) `URL` to enqueue a demo webhook to every interval (default: none)")
	fs.StringVar(&o.secret, "secret", defaultSecret, "HMAC-SHA256 `key` of the webhook signatures")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: leaderd [flags]\n       leaderd status [-db file]\n\n"+
			"Runs three demo jobs (price-refresh, webhook-retry, airdrop-expiry), each on\n"+
			"exactly one of the instances that share the -db file. Stop with Ctrl-C.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, &flagError{err: err, printed: true}
	}
	if fs.NArg() > 0 {
		return o, &flagError{err: fmt.Errorf("leaderd: unexpected argument %q (the only subcommand is status)", fs.Arg(0))}
	}
	if err := o.validate(); err != nil {
		return o, &flagError{err: err}
	}
	return o, nil
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
	if o.db == "" {
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
