package pglease

import (
	"context"
	"fmt"

	"github.com/leaderaware/leaderaware/elector"
)

// LeaseRow is a lease as [Store.List] reports it: the last term of its
// name, held or released. Its fields are those of sqlitelease.LeaseRow, so
// a value of one converts to the other.
type LeaseRow struct {
	// Lease is the last term: for a released lease, its last holder and
	// token, and the Version and Written of the release.
	elector.Lease
	// Released reports that the last holder released the lease, so it is
	// free. A held lease whose holder died is not released: candidates take
	// it over once they have watched it unchanged for its TTL.
	Released bool
}

// List returns every lease the table has held, in name order. It is a read
// for status displays: it needs no term and goes through [Store.Pool], so
// it never delays a lease operation. It returns an empty slice for a table
// without leases and [ErrClosed] after Close.
func (s *Store) List(ctx context.Context) ([]LeaseRow, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	rows, err := s.pool.Query(ctx, s.stmts.List)
	if err != nil {
		return nil, s.listErr(err)
	}
	defer rows.Close()
	out := []LeaseRow{}
	for rows.Next() {
		var r LeaseRow
		var token, version, ttlUS int64
		if err := rows.Scan(&r.Name, &r.Holder, &token, &version, &ttlUS, &r.Released, &r.Written); err != nil {
			return nil, s.listErr(err)
		}
		r.Token, r.Version, r.TTL = uint64(token), uint64(version), fromMicros(ttlUS)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.listErr(err)
	}
	return out, nil
}

func (s *Store) listErr(err error) error {
	return fmt.Errorf("pglease: list leases in %s on %s: %w", s.table, s.target, poolerHint(withoutSecrets(err, s.secrets...)))
}
