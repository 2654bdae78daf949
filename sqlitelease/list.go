package sqlitelease

import (
	"context"
	"fmt"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// LeaseRow is a lease as [Store.List] reports it: the last term of its name,
// held or released.
type LeaseRow struct {
	// Lease is the last term: for a released lease, its last holder and
	// token, and the Version and Written of the release.
	elector.Lease
	// Released reports that the last holder released the lease, so it is
	// free. A held lease whose holder died is not released: candidates
	// take it over once they have watched it unchanged for its TTL, or on
	// Linux at their next attempt (see Process death in the package
	// documentation).
	Released bool
}

// listSQL reads every lease row, held or released, in name order.
const listSQL = `SELECT name, holder, token, version, ttl_ms, released, written_at FROM ` + leaseTable + ` ORDER BY name`

// List returns every lease the file has held, in name order. Rows are never
// deleted, so a name once acquired stays listed. List is a read for status
// displays: it needs no term, goes through the [Store.DB] pool rather than
// the lease connection (it never delays a renewal), and reflects the file
// at one moment. It returns an empty slice for a file without leases,
// [ErrClosed] after Close, and an error matching [ErrFileChanged] if the
// file changed under the store.
func (s *Store) List(ctx context.Context) ([]LeaseRow, error) {
	if s.isClosed.Load() {
		return nil, ErrClosed
	}
	// The file is checked before the read, so that a new connection of the
	// pool does not open another file at the path.
	err := s.checkFile()
	var out []LeaseRow
	if err == nil {
		out, err = s.list(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitelease: list leases in %q: %w", s.path, err)
	}
	return out, nil
}

// list reads the lease rows; it returns an empty slice if there are none.
func (s *Store) list(ctx context.Context) ([]LeaseRow, error) {
	out := []LeaseRow{}
	err := retryBusy(ctx, func() error {
		out = out[:0]
		rows, err := s.DB().QueryContext(ctx, listSQL)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r LeaseRow
			var token, version, ttlMs, written int64
			if err := rows.Scan(&r.Name, &r.Holder, &token, &version, &ttlMs, &r.Released, &written); err != nil {
				return err
			}
			r.Token, r.Version, r.TTL, r.Written = uint64(token), uint64(version), fromMillis(ttlMs), time.UnixMilli(written)
			out = append(out, r)
		}
		return rows.Err()
	})
	return out, err
}
