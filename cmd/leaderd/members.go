package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/leaderaware/leaderaware/placement"
)

// member is an instance of a placement group, as status reads its seat.
type member struct {
	placement.Seat
	Expires time.Time // when its seat runs out unless renewed, by the writer's clock
}

// splitSeats returns the leases of rows that are not membership seats, and
// the members whose seats are held and, as far as the clocks tell (for
// display only, as the lease table's EXPIRES), still renewed at now: a
// member that stopped or drained frees its seat, one that died stops
// renewing it. Members are sorted by group and holder.
func splitSeats(rows []leaseRow, now time.Time) ([]leaseRow, []member) {
	var leases []leaseRow
	var members []member
	for _, r := range rows {
		if !strings.HasPrefix(r.Name, placement.SeatPrefix) {
			leases = append(leases, r)
			continue
		}
		seat, ok := placement.ParseSeat(r.Lease)
		if !ok || r.Released || r.Expires().Before(now) {
			continue
		}
		members = append(members, member{Seat: seat, Expires: r.Expires()})
	}
	slices.SortFunc(members, func(a, b member) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Holder, b.Holder))
	})
	return leases, members
}

// waiting returns the holders of the members that wait for the lease of
// r: those of every group that r's holder is a member of (of every group,
// if it is free or held by no member), but its holder.
func waiting(r leaseRow, members []member) []string {
	holder := r.Holder
	if r.Released {
		holder = ""
	}
	groups := map[string]bool{}
	for _, m := range members {
		if holder != "" && m.Holder == holder {
			groups[m.Group] = true
		}
	}
	var out []string
	for _, m := range members {
		if m.Holder != holder && (len(groups) == 0 || groups[m.Group]) && !slices.Contains(out, m.Holder) {
			out = append(out, m.Holder)
		}
	}
	slices.Sort(out)
	return out
}

// leading returns the names of the leases of rows that holder holds.
func leading(rows []leaseRow, holder string) []string {
	out := []string{}
	for _, r := range rows {
		if !r.Released && r.Holder == holder {
			out = append(out, r.Name)
		}
	}
	return out
}

// printMembers writes the members as a table: for each, its group, since
// when it is a member, the leases it leads and those it waits for.
func printMembers(w io.Writer, rows []leaseRow, members []member, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tGROUP\tSINCE\tLEADS\tWAITS FOR")
	for _, m := range members {
		since := "-"
		if !m.Since.IsZero() {
			since = round(now.Sub(m.Since)) + " ago"
		}
		var waits []string
		for _, r := range rows {
			if slices.Contains(waiting(r, members), m.Holder) {
				waits = append(waits, r.Name)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.Holder, m.Group, since, list(leading(rows, m.Holder)), list(waits))
	}
	if len(members) == 0 {
		fmt.Fprintln(tw, "(no members: no instance balances its jobs here)\t\t\t\t")
	}
	return tw.Flush()
}

// list joins names with commas, or "-" for none.
func list(names []string) string {
	if len(names) == 0 {
		return "-"
	}
	return strings.Join(names, ",")
}
