package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/statuspage"
)

// statusUsage is the top of `leaderd status -h`; the flags follow it.
const statusUsage = "Usage: leaderd status [-db file | -pg DSN | -etcd endpoints | -mysql DSN | -k8s namespace] [-json]\n\n" + statusHelp + "\nFlags:\n"

// status runs `leaderd status [store flag] [-json]`: it prints the leases
// as of now, as a table (see [printLeases]) or as JSON (see [printJSON]).
// It does not create a missing SQLite file.
func status(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("leaderd status", flag.ContinueOnError)
	var o options
	fset.StringVar(&o.db, "db", defaultDB, "SQLite `file` of the leases")
	fset.StringVar(&o.pg, "pg", "", "PostgreSQL `DSN` of the leases, instead of -db (with the search_path that leaderd -pg was given)")
	fset.String("etcd", "", "comma-separated etcd `endpoints` of the leases, instead of -db")
	fset.StringVar(&o.mysql, "mysql", "", "MySQL or MariaDB `DSN` of the leases, instead of -db")
	k8sFlags(fset, &o)
	asJSON := fset.Bool("json", false, "print the leases as JSON")
	err := parse(fset, statusUsage, args, stdout, stderr)
	if err != nil {
		return err
	}
	if fset.NArg() > 0 {
		return &flagError{err: fmt.Errorf("leaderd status: unexpected argument %q", fset.Arg(0))}
	}
	if err := oneStore(fset); err != nil {
		return err
	}
	if o.etcd, err = endpoints(fset); err != nil {
		return err
	}
	rows, err := readLeases(ctx, o, slog.New(slog.NewTextHandler(stderr, nil)))
	if err != nil {
		return fmt.Errorf("leaderd status: %w", err)
	}
	now := time.Now()
	leases, members := splitSeats(rows, now)
	if *asJSON {
		return printJSON(stdout, leases, members, now)
	}
	if err := printLeases(stdout, leases, now); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	return printMembers(stdout, leases, members, now)
}

// readLeases opens the store that o names, lists its leases and closes it.
func readLeases(ctx context.Context, o options, log *slog.Logger) ([]leaseRow, error) {
	s, err := openStore(ctx, o, log)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	return listLeases(ctx, s)
}

// printLeases writes rows as a table: for each job, the holder, fencing
// token and version of its lease, when the holder last renewed it and when
// it expires, relative to now. They compare the writer's clock with this
// one, for display only: a lease past its expiry has a holder that stopped
// renewing, and another instance takes it over once it has watched it for
// its TTL. A free lease shows its last holder and token, and "free".
func printLeases(w io.Writer, rows []leaseRow, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tHOLDER\tTOKEN\tVERSION\tRENEWED\tEXPIRES")
	for _, r := range rows {
		renewed, expires := r.display(now)
		holder, token, version := r.Holder, fmt.Sprint(r.Token), fmt.Sprint(r.Version)
		if holder == "" { // a free lease on etcd or MySQL: the store does not say
			holder, token, version = "-", "-", "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, holder, token, version, renewed, expires)
	}
	if len(rows) == 0 {
		fmt.Fprintln(tw, "(no leases yet)\t\t\t\t\t")
	}
	return tw.Flush()
}

// display returns the RENEWED and EXPIRES cells of r, relative to now:
// "700ms ago" and "in 2.3s" or "1s ago" while held, "-" and "free" once
// released.
func (r leaseRow) display(now time.Time) (renewed, expires string) {
	if r.Released {
		return "-", "free"
	}
	renewed = round(now.Sub(r.Written)) + " ago"
	left := r.Expires().Sub(now)
	if left > 0 {
		return renewed, "in " + round(left)
	}
	return renewed, round(-left) + " ago"
}

// round formats d, at least zero (the clocks of two hosts may differ), to
// 100 ms.
func round(d time.Duration) string {
	return max(d, 0).Round(100 * time.Millisecond).String()
}

// printJSON writes rows and members, read at now, as a JSON object
// {"now": ..., "leases": [...], "members": [...]}, whose leases and members
// are those of the status page's JSON (statuspage.Lease and
// statuspage.Member), each lease with the members that wait for it.
func printJSON(w io.Writer, rows []leaseRow, members []member, now time.Time) error {
	leases := statuspage.Leases(pageLeases(rows), now)
	for i, r := range rows {
		for _, h := range waiting(r, members) {
			leases[i].Waiting = append(leases[i].Waiting, statuspage.Candidate{Holder: h})
		}
	}
	ms := make([]statuspage.Member, len(members))
	for i, m := range members {
		ms[i] = statuspage.Member{Group: m.Group, Holder: m.Holder, Leases: leading(rows, m.Holder)}
		if !m.Since.IsZero() {
			ms[i].Since = &m.Since
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Now     time.Time           `json:"now"`
		Leases  []statuspage.Lease  `json:"leases"`
		Members []statuspage.Member `json:"members"`
	}{now, leases, ms})
}

// pageLeases returns rows as the status page lists them: a released lease
// with its name only, as free.
func pageLeases(rows []leaseRow) []elector.Lease {
	out := make([]elector.Lease, len(rows))
	for i, r := range rows {
		out[i] = r.Lease
		if r.Released {
			out[i] = elector.Lease{Name: r.Name}
		}
	}
	return out
}
