package etcdlease

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderaware/leaderaware/elector"
)

// Fenced is [Store.FencedLease] for the leader term that ctx carries, run
// through [elector.Fence]: it also refuses, sending nothing, a term that
// has ended or is past its trust window, and reports the outcome to the
// observer in ctx.
func (s *Store) Fenced(ctx context.Context, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	var tx *fencedTxn
	begin := func(_ context.Context, l elector.Lease, _ time.Duration) (*fencedTxn, error) {
		if err := s.check(l.Name, time.Second); err != nil {
			return nil, err
		}
		tx = &fencedTxn{s: s, ops: ops}
		return tx, nil
	}
	if err := elector.Fence(ctx, begin, func(context.Context, *fencedTxn) error { return nil }); err != nil {
		return nil, err
	}
	return tx.resp, nil
}

// fencedTxn is a fenced write as [elector.Fence] drives it. etcd's
// transactions are optimistic: Held adds the compare of the lease key with
// the term, which etcd evaluates with the writes, atomically, at Commit.
type fencedTxn struct {
	s    *Store
	ops  []clientv3.Op
	term elector.Lease
	resp *clientv3.TxnResponse
}

func (tx *fencedTxn) Held(_ context.Context, l elector.Lease) error {
	tx.term = l
	return nil
}

func (tx *fencedTxn) Commit(ctx context.Context) (err error) {
	tx.resp, err = tx.s.FencedLease(ctx, tx.term, tx.ops...)
	return err
}

func (tx *fencedTxn) Rollback(context.Context) error { return nil } // nothing was sent

// FencedLease commits ops in one etcd transaction if the lease key holds
// l's term (its token and holder), unreleased: the check and the ops are
// one atomic step, so no takeover can come between them. Otherwise nothing
// is committed and the error matches [elector.ErrLeaseLost]. On success
// the response's Responses are those of ops, in order, and its
// Header.Revision is the revision of their writes.
//
// It takes one transaction, and one more if the term was renewed since l
// (use the term's latest lease, as [elector.Term.Lease] gives). ops must
// not write the store's own keys, and count against etcd's limit of
// operations per transaction (--max-txn-ops, default 128) with one more
// for the check. A ctx without a deadline is bounded by the operation
// timeout.
func (s *Store) FencedLease(ctx context.Context, l elector.Lease, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	if err := s.check(l.Name, time.Second); err != nil {
		return nil, err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	resps, err := s.whileTerms(ctx, []elector.Lease{l}, func(int) []clientv3.Op { return ops })
	switch {
	case err != nil:
		return nil, s.opErr("fenced write for", l.Name, 1, err)
	case resps[0] == nil:
		return nil, fmt.Errorf("etcdlease: fenced write for lease %q token %d of %q: the term is no longer current: %w",
			l.Name, l.Token, l.Holder, elector.ErrLeaseLost)
	}
	return resps[0], nil
}
