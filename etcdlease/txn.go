package etcdlease

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderaware/leaderaware/elector"
)

// maxAttempts bounds the compare-and-sets of one operation. An operation
// tries again only when the key changed between the read that told it what
// to compare and its compare-and-set, in a way that still lets it succeed
// (a free lease freed again, a term renewed by another call): twice or
// three times at most in practice.
const maxAttempts = 8

// batch is how many leases one transaction of GetMany or RenewMany
// covers: half etcd's default --max-txn-ops (128), which also counts the
// operations of a nested transaction against what its parent leaves.
const batch = 64

// cas commits then in one etcd transaction if cmps hold; otherwise the same
// transaction reads key, and cas returns what it holds (nil if absent).
func (s *Store) cas(ctx context.Context, key string, cmps []clientv3.Cmp, then []clientv3.Op) (
	ok bool, resp *clientv3.TxnResponse, cur *mvccpb.KeyValue, err error,
) {
	resp, err = s.client.Txn(ctx).If(cmps...).Then(then...).Else(clientv3.OpGet(key)).Commit()
	if err != nil || resp.Succeeded {
		return err == nil, resp, nil, err
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		cur = kvs[0]
	}
	return false, resp, cur, nil
}

// whileTerms commits then(i) for each terms[i] whose key holds its term
// (token and holder), unreleased, all in one etcd transaction of one nested
// transaction per term, each with its own compare. It returns, for each
// term, the response of its nested transaction with the header of the
// transaction that committed it, or nil if the term is not current. terms
// name distinct leases.
//
// The first compare matches the term in the value: a later write of the
// term holds its token, the write that started it holds 0 at revision
// l.Token; which one is likely follows from l. A nested transaction whose
// compare fails reads the key; if that value still is the term, the next
// transaction compares its ModRevision instead.
func (s *Store) whileTerms(ctx context.Context, terms []elector.Lease, then func(i int) []clientv3.Op) ([]*clientv3.TxnResponse, error) {
	out := make([]*clientv3.TxnResponse, len(terms))
	cmps := make([][]clientv3.Cmp, len(terms))
	var pending []int
	for i, l := range terms {
		if l.Token == 0 || elector.ValidateHolder(l.Holder) != nil {
			continue // no term has them
		}
		key := s.Key(l.Name)
		cmps[i] = hasPrefix(key, valuePrefix(false, l.Token, &l.Holder))
		if l.Version == l.Token { // l is the write that started the term
			cmps[i] = append(hasPrefix(key, valuePrefix(false, 0, &l.Holder)),
				clientv3.Compare(clientv3.ModRevision(key), "=", int64(l.Token)))
		}
		pending = append(pending, i)
	}
	for range maxAttempts {
		if len(pending) == 0 {
			return out, nil
		}
		ops := make([]clientv3.Op, len(pending))
		for j, i := range pending {
			ops[j] = clientv3.OpTxn(cmps[i], then(i), []clientv3.Op{clientv3.OpGet(s.Key(terms[i].Name))})
		}
		resp, err := s.client.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, err
		}
		var again []int
		for j, i := range pending {
			sub := resp.Responses[j].GetResponseTxn()
			if sub.Succeeded {
				out[i] = &clientv3.TxnResponse{Header: resp.Header, Succeeded: true, Responses: sub.Responses}
				continue
			}
			kvs := sub.Responses[0].GetResponseRange().Kvs
			if len(kvs) == 0 {
				continue
			}
			l := terms[i]
			cur, released, err := decodeLease(l.Name, kvs[0])
			if err == nil && !released && cur.Token == l.Token && cur.Holder == l.Holder {
				cmps[i] = []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.Key(l.Name)), "=", kvs[0].ModRevision)}
				again = append(again, i)
			}
		}
		pending = again
	}
	return nil, fmt.Errorf("the key changed %d times while the store tried; try again", maxAttempts)
}
