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
	"github.com/leaderaware/leaderaware/sqlitelease"
)

// status runs `leaderd status [-db file]`: it prints a table of the leases
// in the file (job, holder, token, expires in), as of now. A free lease
// shows its last holder and token and "free". It does not create a missing
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

// printLeases writes ls as a table, with expiry relative to now.
func printLeases(w io.Writer, ls []elector.Lease, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tHOLDER\tTOKEN\tEXPIRES IN")
	for _, l := range ls {
		expires := "free"
		if d := l.ExpiresAt.Sub(now); d > 0 {
			expires = d.Round(100 * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", l.Name, l.Holder, l.Token, expires)
	}
	if len(ls) == 0 {
		fmt.Fprintln(tw, "(no leases yet)\t\t\t")
	}
	return tw.Flush()
}
