package mysqllease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/leaderaware/leaderaware/elector"
)

// batchMax bounds the leases of one statement of GetMany and RenewMany.
const batchMax = 1000

// GetMany implements [elector.BulkReader] with one primary-key SELECT per
// 1,000 names. A released lease, or one without a row, comes back free.
func (s *Store) GetMany(ctx context.Context, names []string) ([]elector.Lease, error) {
	for _, name := range names {
		if err := s.check(ctx, name, elector.MinTTL); err != nil {
			return nil, err
		}
	}
	found := make(map[string]elector.Lease, len(names))
	for chunk := range slices.Chunk(names, batchMax) {
		args := make([]any, len(chunk))
		for i, name := range chunk {
			args[i] = name
		}
		err := s.leases.do(ctx, func(q querier) error {
			rows, err := q.QueryContext(ctx, s.sqlGetMany+placeholders(len(chunk), "?")+")", args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				l, released, err := scanLease(rows)
				if err != nil {
					return err
				}
				if !released {
					found[l.Name] = l
				}
			}
			return rows.Err()
		})
		if err != nil {
			return nil, s.opErr("read", leasesOf(chunk...), err)
		}
	}
	out := make([]elector.Lease, len(names))
	for i, name := range names {
		out[i] = cmp.Or(found[name], elector.Lease{Name: name})
	}
	return out, nil
}

// RenewMany implements [elector.BatchRenewer] with one autocommit UPDATE
// per 1,000 terms, which must be of distinct leases.
func (s *Store) RenewMany(ctx context.Context, terms []elector.Lease) ([]elector.Lease, error) {
	seen := make(map[string]bool, len(terms))
	for _, l := range terms {
		if err := s.check(ctx, l.Name, l.TTL); err != nil {
			return nil, err
		}
		if seen[l.Name] {
			return nil, fmt.Errorf("mysqllease: renew: lease %q comes twice in one batch; renew each lease once", l.Name)
		}
		seen[l.Name] = true
	}
	out := make([]elector.Lease, 0, len(terms))
	for chunk := range slices.Chunk(terms, batchMax) {
		renewed, err := s.renewChunk(ctx, chunk)
		if err != nil {
			return nil, err
		}
		out = append(out, renewed...)
	}
	return out, nil
}

// renewChunk renews terms with one UPDATE that also matches each term's
// version, so that every new version follows from the statement's clock
// reading, which comes back as LAST_INSERT_ID. When some did not match, it
// reads their rows: a term that still holds its row has the version this
// call wrote, or another one (a row rolled back) and is renewed alone.
func (s *Store) renewChunk(ctx context.Context, terms []elector.Lease) ([]elector.Lease, error) {
	written := s.wallMicros()
	names, in := make([]string, len(terms)), make([]any, len(terms))
	ttls, keys := make([]any, 0, 2*len(terms)), make([]any, 0, 4*len(terms))
	for i, l := range terms {
		names[i], in[i] = l.Name, l.Name
		ttls = append(ttls, l.Name, micros(l.TTL))
		keys = append(keys, l.Name, l.Token, l.Holder, l.Version)
	}
	args := slices.Concat(ttls, []any{written}, in, keys)
	query := `UPDATE ` + s.table + ` SET version = GREATEST(version + 1, LAST_INSERT_ID(` + nowMicros + `)),
	ttl_us = CASE name` + strings.Repeat(" WHEN ? THEN ?", len(terms)) + ` END, written_at = ` + writtenAt + `
WHERE name IN (` + placeholders(len(terms), "?") + `) AND NOT released
	AND (name, token, holder, version) IN (` + placeholders(len(terms), "(?, ?, ?, ?)") + `)`
	res, err := s.exec(ctx, query, args...)
	matched, err := affected(res, err)
	var clock uint64
	if err == nil && matched > 0 {
		clock, err = wrote(res, nil)
	}
	if err != nil {
		return nil, s.opErr("renew", leasesOf(names...), err)
	}
	out := make([]elector.Lease, len(terms))
	if matched == int64(len(terms)) {
		for i, l := range terms {
			out[i] = renewed(l, l.TTL, max(l.Version+1, clock), written)
		}
		return out, nil
	}
	cur, err := s.GetMany(ctx, names)
	if err != nil {
		return nil, err
	}
	for i, l := range terms {
		switch c := cur[i]; {
		case c.Token != l.Token || c.Holder != l.Holder:
			// lost: out[i] stays the zero Lease
		case clock != 0 && c.Version == max(l.Version+1, clock):
			out[i] = c
		default:
			out[i], err = s.Renew(ctx, l, l.TTL)
			if err != nil && !errors.Is(err, elector.ErrLeaseLost) {
				return nil, err
			}
		}
	}
	return out, nil
}

// placeholders is n copies of p, separated by commas.
func placeholders(n int, p string) string {
	return p + strings.Repeat(", "+p, n-1)
}

// leasesOf names the leases of a batch in an error.
func leasesOf(names ...string) string {
	if len(names) == 1 {
		return fmt.Sprintf("lease %q", names[0])
	}
	return fmt.Sprintf("%d leases (%q, ...)", len(names), names[0])
}
