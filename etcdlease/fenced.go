package etcdlease

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderaware/leaderaware/elector"
)

// Fenced is [Store.FencedLease] for the lease of the leader term that ctx
// carries (see [elector.ContextWithTerm]; the decorator gives it to the jobs
// it starts), and it also refuses a term that has already ended. A ctx
// without a term gets an error matching [elector.ErrNoTerm]; an ended term
// gets an error matching [elector.ErrLeaseLost] and the term's own error,
// and nothing is sent to etcd. Fenced reports commits and refusals to the
// observer in ctx, if any ([elector.ObserveFenced]).
func (s *Store) Fenced(ctx context.Context, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	t, ok := elector.TermFromContext(ctx)
	if !ok {
		return nil, fmt.Errorf("etcdlease: fenced write: %w", elector.ErrNoTerm)
	}
	l := t.Lease()
	var (
		resp *clientv3.TxnResponse
		err  error
	)
	select {
	case <-t.Done():
		err = fmt.Errorf("etcdlease: fenced write for lease %q token %d: the term has ended (%w): %w",
			l.Name, l.Token, t.Err(), elector.ErrLeaseLost)
	default:
		resp, err = s.FencedLease(ctx, l, ops...)
	}
	elector.ObserveFenced(ctx, err)
	return resp, err
}

// FencedLease commits ops in one etcd transaction if the lease key holds
// l's term (its token and holder), unreleased: the check and the ops are
// one atomic step, so no takeover can come between them. Otherwise nothing
// is committed and the error matches [elector.ErrLeaseLost]. On success
// the response's Responses are those of ops, in order, and its
// Header.Revision is the revision of their writes.
//
// Like Renew, it takes one transaction, and one more if the term was
// renewed since l (use the term's latest lease, as [elector.Term.Lease]
// gives). ops must not write the store's own keys, and count against
// etcd's limit of operations per transaction (--max-txn-ops, default 128).
// A ctx without a deadline is bounded by the operation timeout.
func (s *Store) FencedLease(ctx context.Context, l elector.Lease, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	if err := s.check(l.Name, time.Second); err != nil {
		return nil, err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	resp, err := s.whileTerm(ctx, l, ops)
	switch {
	case err != nil:
		return nil, s.opErr("fenced write for", l.Name, err)
	case resp == nil:
		return nil, fmt.Errorf("etcdlease: fenced write for lease %q token %d of %q: the term is no longer current: %w",
			l.Name, l.Token, l.Holder, elector.ErrLeaseLost)
	}
	return resp, nil
}
