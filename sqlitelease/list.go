package sqlitelease

import (
	"context"
	"fmt"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// listSQL reads every lease row, live or free, in name order.
const listSQL = `SELECT name, holder, token, expires_at FROM ` + leaseTable + ` ORDER BY name`

// List returns every lease the file has held, in name order: for a live
// lease its current term, and for a free one its last term, whose ExpiresAt
// is at or before now (the time it expired or was released). Rows are never
// deleted, so a name once acquired stays listed. List is a read for status
// displays: it needs no term, goes through the [Store.DB] pool rather than
// the lease connection (it never delays a renewal), and reflects the file
// at one moment. It returns an empty slice for a file without leases, and
// [ErrClosed] after Close.
func (s *Store) List(ctx context.Context) ([]elector.Lease, error) {
	if s.isClosed.Load() {
		return nil, ErrClosed
	}
	var out []elector.Lease
	err := retryBusy(ctx, func() error {
		out = out[:0]
		rows, err := s.db.QueryContext(ctx, listSQL)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var l elector.Lease
			var token, expires int64
			if err := rows.Scan(&l.Name, &l.Holder, &token, &expires); err != nil {
				return err
			}
			l.Token, l.ExpiresAt = uint64(token), time.UnixMilli(expires)
			out = append(out, l)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitelease: list leases in %q: %w", s.path, err)
	}
	if out == nil {
		out = []elector.Lease{}
	}
	return out, nil
}
