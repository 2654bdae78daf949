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

// whileTerm commits then if the key of l holds l's term (token and
// holder), unreleased. It returns the transaction's response if it
// committed, and nil if the term is not current.
//
// The first compare-and-set matches the term in the value: a later write of
// the term holds its token, the write that started it holds 0 at revision
// l.Token; which one is likely follows from l. If it fails and the value
// read in the same transaction is still the term, it compares that value's
// ModRevision.
func (s *Store) whileTerm(ctx context.Context, l elector.Lease, then []clientv3.Op) (*clientv3.TxnResponse, error) {
	if l.Token == 0 || elector.ValidateHolder(l.Holder) != nil {
		return nil, nil // no term has them
	}
	key := s.Key(l.Name)
	cmps := hasPrefix(key, valuePrefix(false, l.Token, &l.Holder))
	if l.Version == l.Token { // l is the write that started the term
		cmps = append(hasPrefix(key, valuePrefix(false, 0, &l.Holder)),
			clientv3.Compare(clientv3.ModRevision(key), "=", int64(l.Token)))
	}
	for range maxAttempts {
		ok, resp, kv, err := s.cas(ctx, key, cmps, then)
		switch {
		case err != nil:
			return nil, err
		case ok:
			return resp, nil
		case kv == nil:
			return nil, nil
		}
		cur, released, err := decodeLease(l.Name, kv)
		if err != nil || released || cur.Token != l.Token || cur.Holder != l.Holder {
			return nil, nil
		}
		cmps = []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)}
	}
	return nil, fmt.Errorf("the key changed %d times while the store tried; try again", maxAttempts)
}
