package etcdlease

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/notifytest"
)

// pushBound is how soon a write in another Store must reach a Notify
// callback: the watch delivers it in milliseconds.
const pushBound = 2 * time.Second

// expectState waits up to pushBound for r to get the Known state want.
func expectState(t *testing.T, r *notifytest.Recorder, want elector.Lease, what string) elector.Change {
	t.Helper()
	return r.ExpectState(t, pushBound, want, what)
}

// TestNotifyPushesWrites proves that Notify pushes what another Store (as
// on another host) writes as Known states: an acquire, a renewal, a
// takeover, a release and a delete, the last two as free; a value that is
// no lease as a read of that name; and a read of everything when the watch
// starts.
func TestNotifyPushesWrites(t *testing.T) {
	srv := startEtcd(t)
	prefix := uniquePrefix()
	a, b, watching := openStore(t, srv, WithPrefix(prefix)), openStore(t, srv, WithPrefix(prefix)), openStore(t, srv, WithPrefix(prefix))
	r := notifytest.New()
	stop := watching.Notify(r.Changed)
	defer stop()
	r.Expect(t, pushBound, "the watch starts", notifytest.ReadAll)

	l, err := a.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	got := expectState(t, r, l, "an acquire")
	assert.Equal(t, l, got.State)
	renewed, err := a.Renew(testCtx(t), l, 2*time.Minute)
	require.NoError(t, err)
	assert.Equal(t, 2*time.Minute, expectState(t, r, renewed, "a renewal").State.TTL)
	taken, err := b.TryAcquire(testCtx(t), "job", "b", time.Minute, renewed)
	require.NoError(t, err)
	assert.Equal(t, "b", expectState(t, r, taken, "a takeover").State.Holder)
	require.NoError(t, b.Release(testCtx(t), taken))
	expectState(t, r, elector.Lease{Name: "job"}, "a release")

	again, err := a.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	expectState(t, r, again, "a new term")
	raw := rawClient(t, srv)
	_, err = raw.Delete(testCtx(t), a.Key("job"))
	require.NoError(t, err)
	expectState(t, r, elector.Lease{Name: "job"}, "a delete")
	_, err = raw.Put(testCtx(t), a.Key("junk"), "not json")
	require.NoError(t, err)
	r.Expect(t, pushBound, "a value that is no lease", func(c elector.Change) bool { return c.Name == "junk" && !c.Known })
}

// TestNotifyOneWatch proves that the watch runs while any Notify is not
// stopped (goleak in TestMain checks that the last stop and Close leave
// nothing behind), that a stopped callback is called no more, and that
// Close ends the watch and Notify after Close starts none.
func TestNotifyOneWatch(t *testing.T) {
	srv := startEtcd(t)
	prefix := uniquePrefix()
	holder := openStore(t, srv, WithPrefix(prefix))
	s, err := Open(testCtx(t), []string{srv.endpoint}, WithPrefix(prefix))
	require.NoError(t, err)
	assert.False(t, watchRunning(s), "no watch before the first Notify")
	r1, r2 := notifytest.New(), notifytest.New()
	stop1, stop2 := s.Notify(r1.Changed), s.Notify(r2.Changed)
	r1.Expect(t, pushBound, "the watch starts", notifytest.ReadAll) // writes before it are read, not pushed

	l, err := holder.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	expectState(t, r1, l, "the first callback")
	expectState(t, r2, l, "the second callback")
	stop1()
	n := r1.Len()
	l, err = holder.Renew(testCtx(t), l, time.Minute)
	require.NoError(t, err)
	expectState(t, r2, l, "the callback that was not stopped")
	assert.Equal(t, n, r1.Len(), "a stopped callback must not be called")
	stop2()
	assert.False(t, watchRunning(s), "the last stop ends the watch")

	r3 := notifytest.New()
	defer s.Notify(r3.Changed)()
	r3.Expect(t, pushBound, "a new watch after the last stop", notifytest.ReadAll)
	require.NoError(t, s.Close())
	assert.False(t, watchRunning(s), "Close ends the watch")
	n = r3.Len()
	_, err = holder.Renew(testCtx(t), l, time.Minute)
	require.NoError(t, err)
	s.Notify(r3.Changed)()
	assert.False(t, watchRunning(s), "Notify after Close must start no watch")
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, n, r3.Len(), "nothing is pushed after Close")
	require.NoError(t, s.Close(), "Close is idempotent")
}

// watchThroughProxy returns a Store on srv, and what a Notify of another
// Store on the same prefix, which reaches srv through p, receives once
// its watch started.
func watchThroughProxy(t *testing.T) (srv *etcdServer, p *proxy, holder *Store, r *notifytest.Recorder) {
	srv = startEtcd(t)
	p = startProxy(t, srv)
	prefix := uniquePrefix()
	watching := openStore(t, &etcdServer{endpoint: p.endpoint}, WithPrefix(prefix))
	holder = openStore(t, srv, WithPrefix(prefix))
	r = notifytest.New()
	t.Cleanup(watching.Notify(r.Changed))
	r.Expect(t, pushBound, "the watch starts", notifytest.ReadAll)
	return srv, p, holder, r
}

// TestNotifySurvivesConnectionLoss proves that the watch outlives the loss
// of its connection (a network failure, a member restart): the client
// resumes it where it was, so a write while it reconnects is still pushed.
func TestNotifySurvivesConnectionLoss(t *testing.T) {
	_, p, holder, r := watchThroughProxy(t)

	p.cut()
	l, err := holder.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{}) // while the client reconnects
	require.NoError(t, err)
	expectState(t, r, l, "an acquire after the connection loss")
	require.NoError(t, holder.Release(testCtx(t), l))
	expectState(t, r, elector.Lease{Name: "job"}, "a release after the connection loss")
}

// TestNotifyAfterCompaction proves that a watch that cannot resume, because
// etcd compacted the revisions it missed while cut off, starts again and
// asks for a read of every lease.
func TestNotifyAfterCompaction(t *testing.T) {
	srv, p, holder, r := watchThroughProxy(t)
	l, err := holder.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	expectState(t, r, l, "an acquire")

	p.hold(true)
	p.cut()
	l, err = holder.Renew(testCtx(t), l, time.Minute)
	require.NoError(t, err)
	raw := rawClient(t, srv)
	resp, err := raw.Put(testCtx(t), "unwatched", "x")
	require.NoError(t, err)
	_, err = raw.Compact(testCtx(t), resp.Header.Revision)
	require.NoError(t, err)
	p.hold(false)
	r.Expect(t, 10*time.Second, "a read of everything after the compaction", notifytest.ReadAll)
	l, err = holder.Renew(testCtx(t), l, time.Minute)
	require.NoError(t, err)
	expectState(t, r, l, "a renewal after the watch started again")
}

// countingKV counts the transactions a client sends.
type countingKV struct {
	clientv3.KV
	txns atomic.Int64
}

func (c *countingKV) Txn(ctx context.Context) clientv3.Txn {
	c.txns.Add(1)
	return c.KV.Txn(ctx)
}

// countingStore returns a Store on srv whose transactions are counted.
func countingStore(t *testing.T, srv *etcdServer, prefix string) (*Store, *countingKV) {
	c := rawClient(t, srv)
	kv := &countingKV{KV: c.KV}
	c.KV = kv
	s, err := New(c, WithPrefix(prefix))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s, kv
}

// TestGetMany proves that GetMany returns the state of every name in order
// (held, released, deleted or never written), in one transaction per 64
// names, and reports a key that holds no lease as free, for TryAcquire to
// name.
func TestGetMany(t *testing.T) {
	const n = 100
	srv := startEtcd(t)
	prefix := uniquePrefix()
	s, kv := countingStore(t, srv, prefix)
	want := make([]elector.Lease, n)
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("job-%d", i)
		want[i] = elector.Lease{Name: names[i]}
		if i%4 == 3 {
			continue // never written
		}
		l, err := s.TryAcquire(testCtx(t), names[i], "a", time.Minute, elector.Lease{})
		require.NoError(t, err)
		switch i % 4 {
		case 0:
			want[i] = l
		case 1:
			want[i], err = s.Renew(testCtx(t), l, 2*time.Minute)
			require.NoError(t, err)
		case 2:
			require.NoError(t, s.Release(testCtx(t), l))
		}
	}
	_, err := rawClient(t, srv).Delete(testCtx(t), s.Key(names[4]))
	require.NoError(t, err)
	want[4] = elector.Lease{Name: names[4]}

	before := kv.txns.Load()
	got, err := s.GetMany(testCtx(t), names)
	require.NoError(t, err)
	assert.EqualValues(t, 2, kv.txns.Load()-before, "one transaction per 64 names")
	require.Len(t, got, n)
	for i := range want {
		assert.True(t, got[i].Name == want[i].Name && got[i].Token == want[i].Token && got[i].Version == want[i].Version &&
			got[i].Holder == want[i].Holder && got[i].TTL == want[i].TTL, "%s: got %+v, want %+v", names[i], got[i], want[i])
	}
	none, err := s.GetMany(testCtx(t), nil)
	require.NoError(t, err)
	assert.Empty(t, none)

	_, err = rawClient(t, srv).Put(testCtx(t), s.Key("junk"), "not json")
	require.NoError(t, err)
	got, err = s.GetMany(testCtx(t), []string{"junk", names[0]})
	require.NoError(t, err, "a key that holds no lease fails no other name")
	assert.Equal(t, []elector.Lease{{Name: "junk"}, want[0]}, got)
	_, err = s.TryAcquire(testCtx(t), "junk", "a", time.Minute, elector.Lease{})
	require.ErrorContains(t, err, s.Key("junk"), "TryAcquire names the key")
	_, err = s.GetMany(testCtx(t), []string{names[0], ""})
	require.Error(t, err, "an invalid name")
}

// TestRenewMany proves that RenewMany renews every current term for its
// own TTL in one transaction per 64 terms, reports the terms that are no
// longer current (taken over, released, deleted, forged) with the zero
// Lease and leaves them as they are, renews a term whose caller has an
// older write of it, and refuses a name given twice.
func TestRenewMany(t *testing.T) {
	const n = 100
	srv := startEtcd(t)
	prefix := uniquePrefix()
	s, kv := countingStore(t, srv, prefix)
	other := openStore(t, srv, WithPrefix(prefix))
	terms := make([]elector.Lease, n)
	lost := make(map[int]string)
	for i := range n {
		l, err := s.TryAcquire(testCtx(t), fmt.Sprintf("job-%d", i), "a", time.Minute, elector.Lease{})
		require.NoError(t, err)
		l.TTL = time.Duration(i+1) * time.Second
		terms[i] = l
	}
	_, err := other.TryAcquire(testCtx(t), terms[1].Name, "b", time.Minute, terms[1])
	require.NoError(t, err)
	lost[1] = "taken over"
	require.NoError(t, s.Release(testCtx(t), terms[2]))
	lost[2] = "released"
	_, err = rawClient(t, srv).Delete(testCtx(t), s.Key(terms[3].Name))
	require.NoError(t, err)
	lost[3] = "deleted"
	terms[4].Holder = "forged"
	lost[4] = "another holder"
	_, err = s.Renew(testCtx(t), terms[70], time.Minute) // the caller's lease is an older write
	require.NoError(t, err)

	before := kv.txns.Load()
	got, err := s.RenewMany(testCtx(t), terms)
	require.NoError(t, err)
	assert.EqualValues(t, 3, kv.txns.Load()-before, "one transaction per 64 terms, and one more for the term renewed since")
	require.Len(t, got, n)
	for i, l := range terms {
		if what, ok := lost[i]; ok {
			assert.Equal(t, elector.Lease{}, got[i], "%s: %s", l.Name, what)
			continue
		}
		assert.Equal(t, l.Token, got[i].Token, l.Name)
		assert.Equal(t, l.TTL, got[i].TTL, l.Name)
		assert.Greater(t, got[i].Version, l.Version, l.Name)
		cur, err := s.Get(testCtx(t), l.Name)
		require.NoError(t, err)
		assert.Equal(t, got[i].Version, cur.Version, l.Name)
		assert.Equal(t, l.TTL, cur.TTL, l.Name)
	}
	held, err := s.Get(testCtx(t), terms[1].Name)
	require.NoError(t, err)
	assert.Equal(t, "b", held.Holder, "a lost term is left as it is")
	_, err = s.Get(testCtx(t), terms[2].Name)
	require.ErrorIs(t, err, elector.ErrNoLease, "a released term stays released")

	_, err = s.RenewMany(testCtx(t), []elector.Lease{got[0], got[0]})
	require.ErrorContains(t, err, terms[0].Name)
	_, err = s.RenewMany(testCtx(t), []elector.Lease{{Name: "job-0", Token: 1, Holder: "a"}})
	require.Error(t, err, "a zero TTL")
}
