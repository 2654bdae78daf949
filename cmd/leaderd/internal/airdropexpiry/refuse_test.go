package airdropexpiry_test

import (
	"context"
	"database/sql"

	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/jobdb"
	"github.com/leaderaware/leaderaware/elector"
)

// refuseAfter lets n fenced transactions through, then releases lease in
// the store before each further one, so they run for a deposed leader.
type refuseAfter struct {
	jobdb.FencedStore
	n     int
	store elector.Store
	lease elector.Lease
}

func (r *refuseAfter) Fenced(ctx context.Context, fn func(context.Context, *sql.Tx) error) error {
	if r.n == 0 {
		if err := r.store.Release(ctx, r.lease); err != nil {
			return err
		}
	} else {
		r.n--
	}
	return r.FencedStore.Fenced(ctx, fn)
}
