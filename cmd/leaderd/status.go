package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"text/tabwriter"
	"time"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/pglease"
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// statusUsage is the top of `leaderd status -h`; the flags follow it.
const statusUsage = "Usage: leaderd status [-db file | -pg DSN]\n\n" + statusHelp + "\nFlags:\n"

// status runs `leaderd status [-db file | -pg DSN]`: it prints a table of
// the leases (see [printLeases]), as of now. It does not create a missing
// SQLite file.
func status(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("leaderd status", flag.ContinueOnError)
	db := fset.String("db", defaultDB, "SQLite `file` of the leases")
	pg := fset.String("pg", "", "PostgreSQL `DSN` of the leases, instead of -db (with the search_path that leaderd -pg was given)")
	if err := parse(fset, statusUsage, args, stdout, stderr); err != nil {
		return err
	}
	if fset.NArg() > 0 {
		return &flagError{err: fmt.Errorf("leaderd status: unexpected argument %q", fset.Arg(0))}
	}
	if err := oneStore(fset); err != nil {
		return err
	}
	if *pg == "" && *db == "" {
		return &flagError{err: errors.New("leaderd status: -db is empty")}
	}
	rows, err := listLeases(ctx, *db, *pg)
	if err != nil {
		return fmt.Errorf("leaderd status: %w", err)
	}
	return printLeases(stdout, rows, time.Now())
}

// leaseRow is a lease as both stores list it: sqlitelease.LeaseRow and
// pglease.LeaseRow convert to it.
type leaseRow struct {
	elector.Lease
	Released bool
}

// listLeases lists the leases in the PostgreSQL database that pg names (in
// the schema of its search_path, like leaderd -pg), or if pg is empty, in
// the SQLite file db, which it does not create.
func listLeases(ctx context.Context, db, pg string) ([]leaseRow, error) {
	if pg != "" {
		s, err := pglease.Open(ctx, pg, pgOptions(pg)...)
		if err != nil {
			return nil, err
		}
		defer s.Close()
		ls, err := s.List(ctx)
		return toRows(ls), err
	}
	if _, err := os.Stat(db); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no lease file %q (start leaderd first, or pass -db or -pg): %w", db, err)
	}
	s, err := sqlitelease.Open(db)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	ls, err := s.List(ctx)
	return toRows(ls), err
}

// toRows converts a store's lease rows.
func toRows[R ~struct {
	elector.Lease
	Released bool
}](ls []R) []leaseRow {
	rows := make([]leaseRow, len(ls))
	for i, l := range ls {
		rows[i] = leaseRow(l)
	}
	return rows
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
		renewed, expires := "-", "free"
		if !r.Released {
			renewed = round(now.Sub(r.Written)) + " ago"
			if d := r.Expires().Sub(now); d > 0 {
				expires = "in " + round(d)
			} else {
				expires = round(-d) + " ago"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", r.Name, r.Holder, r.Token, r.Version, renewed, expires)
	}
	if len(rows) == 0 {
		fmt.Fprintln(tw, "(no leases yet)\t\t\t\t\t")
	}
	return tw.Flush()
}

// round formats d, at least zero (the clocks of two hosts may differ), to
// 100 ms.
func round(d time.Duration) string {
	return max(d, 0).Round(100 * time.Millisecond).String()
}
