package etcdlease

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderaware/leaderaware/elector"
)

// TestFencedCommitsForCurrentTerm proves that FencedLease commits for the
// current term, whichever write of the term the key holds and whichever
// version the caller has, and returns the responses of its ops.
func TestFencedCommitsForCurrentTerm(t *testing.T) {
	srv := startEtcd(t)
	s := openStore(t, srv, WithPrefix(uniquePrefix()))
	raw := rawClient(t, srv)
	l, err := s.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)

	resp, err := s.FencedLease(testCtx(t), l, clientv3.OpPut("app/x", "1"), clientv3.OpGet("app/x"))
	require.NoError(t, err, "fenced by the write that started the term")
	require.Len(t, resp.Responses, 2)
	assert.Equal(t, "1", string(resp.Responses[1].GetResponseRange().Kvs[0].Value))
	assert.Greater(t, resp.Header.Revision, int64(l.Version))

	r, err := s.Renew(testCtx(t), l, time.Minute)
	require.NoError(t, err)
	_, err = s.FencedLease(testCtx(t), l, clientv3.OpPut("app/x", "2"))
	require.NoError(t, err, "fenced by the term's acquired lease after a renewal")
	_, err = s.FencedLease(testCtx(t), r, clientv3.OpPut("app/x", "3"))
	require.NoError(t, err, "fenced by the renewed lease")
	got, err := raw.Get(testCtx(t), "app/x")
	require.NoError(t, err)
	assert.Equal(t, "3", string(got.Kvs[0].Value))
}

// TestFencedRefusedAfterTakeover proves that a stale leader's fenced
// operations are refused with ErrLeaseLost and write nothing, after a
// takeover, after a release, and for the same holder's earlier term.
func TestFencedRefusedAfterTakeover(t *testing.T) {
	srv := startEtcd(t)
	s := openStore(t, srv, WithPrefix(uniquePrefix()))
	raw := rawClient(t, srv)
	old, err := s.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	cur, err := s.TryAcquire(testCtx(t), "job", "b", time.Minute, old)
	require.NoError(t, err)
	_, err = s.FencedLease(testCtx(t), old, clientv3.OpPut("app/y", "stale"))
	require.ErrorIs(t, err, elector.ErrLeaseLost)
	t.Log(err)

	again, err := s.TryAcquire(testCtx(t), "job", "b", time.Minute, cur)
	require.NoError(t, err)
	_, err = s.FencedLease(testCtx(t), cur, clientv3.OpPut("app/y", "stale"))
	require.ErrorIs(t, err, elector.ErrLeaseLost, "the same holder's earlier term")

	forged := again
	forged.Holder = "a"
	_, err = s.FencedLease(testCtx(t), forged, clientv3.OpPut("app/y", "stale"))
	require.ErrorIs(t, err, elector.ErrLeaseLost, "the current token with another holder")

	require.NoError(t, s.Release(testCtx(t), again))
	_, err = s.FencedLease(testCtx(t), again, clientv3.OpPut("app/y", "stale"))
	require.ErrorIs(t, err, elector.ErrLeaseLost, "a released term")

	got, err := raw.Get(testCtx(t), "app/y")
	require.NoError(t, err)
	assert.Empty(t, got.Kvs, "a refused fenced write must write nothing")
}

// TestFencedFromContext proves that Fenced takes the term from the
// context the decorator gives jobs: it commits while the term holds,
// refuses once it has ended, and refuses a context without a term.
func TestFencedFromContext(t *testing.T) {
	srv := startEtcd(t)
	s := openStore(t, srv, WithPrefix(uniquePrefix()))
	e, err := elector.New(s, "job", elector.Config{TTL: 3 * time.Second})
	require.NoError(t, err)
	term, err := e.Campaign(testCtx(t))
	require.NoError(t, err)
	var seen []elector.Event
	ctx := elector.ContextWithObserver(elector.ContextWithTerm(testCtx(t), term), observerFunc(func(e elector.Event) {
		seen = append(seen, e)
	}))

	resp, err := s.Fenced(ctx, clientv3.OpPut("app/z", "1"))
	require.NoError(t, err)
	assert.True(t, resp.Succeeded)

	require.NoError(t, term.Resign(testCtx(t)))
	_, err = s.Fenced(ctx, clientv3.OpPut("app/z", "2"))
	require.ErrorIs(t, err, elector.ErrLeaseLost)

	_, err = s.Fenced(context.Background(), clientv3.OpPut("app/z", "3"))
	require.ErrorIs(t, err, elector.ErrNoTerm)
	require.Len(t, seen, 2, "Fenced reports each commit and refusal to the observer in ctx")
	assert.Equal(t, elector.EventFenced, seen[0].Kind)
	assert.Equal(t, []elector.Result{elector.ResultOK, elector.ResultLost}, []elector.Result{seen[0].Result, seen[1].Result})
	assert.Equal(t, term.Token(), seen[0].Token)

	got, err := rawClient(t, srv).Get(testCtx(t), "app/z")
	require.NoError(t, err)
	assert.Equal(t, "1", string(got.Kvs[0].Value))
}

type observerFunc func(elector.Event)

func (f observerFunc) Observe(e elector.Event) { f(e) }
