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

	"github.com/leaderaware/leaderaware/sqlitelease"
)

// status runs `leaderd status [-db file]`: it prints a table of the leases
// in the file (see [printLeases]), as of now. It does not create a missing
// file.
func status(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("leaderd status", flag.ContinueOnError)
	fset.SetOutput(stderr)
	db := fset.String("db", defaultDB, "SQLite `file` of the leases")
	if err := fset.Parse(args); err != nil {
		return &flagError{err: err, printed: true}
	}
	if fset.NArg() > 0 {
		return &flagError{err: fmt.Errorf("leaderd status: unexpected argument %q", fset.Arg(0))}
	}
	if *db == "" {
		return &flagError{err: errors.New("leaderd status: -db is empty")}
	}
	if _, err := os.Stat(*db); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("leaderd status: no lease file %q (start leaderd first, or pass -db): %w", *db, err)
	}
	s, err := sqlitelease.Open(*db)
	if err != nil {
		return fmt.Errorf("leaderd status: %w", err)
	}
	defer s.Close()
	ls, err := s.List(ctx)
	if err != nil {
		return fmt.Errorf("leaderd status: %w", err)
	}
	return printLeases(stdout, ls, time.Now())
}

// printLeases writes rows as a table: for each job, the holder, fencing
// token and version of its lease, when the holder last renewed it and when
// it expires, relative to now. They compare the writer's clock with this
// one, for display only: a lease past its expiry has a holder that stopped
// renewing, and another instance takes it over once it has watched it for
// its TTL. A free lease shows its last holder and token, and "free".
func printLeases(w io.Writer, rows []sqlitelease.LeaseRow, now time.Time) error {
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
