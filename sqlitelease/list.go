package sqlitelease

import (
	"context"
	"fmt"
	"time"

	"github.com/leaderaware/leaderaware/elector"
)

// LeaseRow is a lease as [Store.List] reports it: the last term of its name.
type LeaseRow struct {
	elector.Lease
	// Released reports that the last holder released the lease.
	Released bool
}

const listSQL = `SELECT name, holder, token, version, ttl_ms, released, written_at FROM ` + leaseTable + ` ORDER BY name`

// List returns every lease the file has held (rows are never deleted), in
// name order, for status displays: it needs no term, reads through the
// [Store.DB] pool, and returns an error matching [ErrFileChanged] if the file
// changed under the store.
func (s *Store) List(ctx context.Context) ([]LeaseRow, error) {
	if s.isClosed.Load() {
		return nil, ErrClosed
	}
	// First, so that a new connection of the pool opens no other file.
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
