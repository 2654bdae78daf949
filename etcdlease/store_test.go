package etcdlease

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/elector/electortest"
)

// TestStore runs the elector.Store conformance suite, linearizability
// included, on one embedded etcd; each subtest gets a Store of its own.
func TestStore(t *testing.T) {
	srv := startEtcd(t)
	prefix := uniquePrefix()
	electortest.TestStore(t, func(t *testing.T) elector.Store {
		return openStore(t, srv, WithPrefix(prefix))
	})
}

// TestTokenIncreasesAfterDelete proves that tokens keep growing when an
// operator deletes lease keys (etcdctl del, one key or the whole prefix):
// a token is the etcd revision of the write that started its term, and
// etcd's revision never goes back.
func TestTokenIncreasesAfterDelete(t *testing.T) {
	srv := startEtcd(t)
	s := openStore(t, srv, WithPrefix(uniquePrefix()))
	raw := rawClient(t, srv)
	var last elector.Lease
	acquire := func(after string) {
		t.Helper()
		l, err := s.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
		require.NoError(t, err, "acquire after %s", after)
		assert.Greater(t, l.Token, last.Token, "token after %s", after)
		assert.Greater(t, l.Version, last.Version, "version after %s", after)
		last = l
	}
	acquire("nothing")
	_, err := raw.Delete(testCtx(t), s.Key("job"))
	require.NoError(t, err)
	_, err = s.Get(testCtx(t), "job")
	require.ErrorIs(t, err, elector.ErrNoLease, "a deleted key is a free lease")
	acquire("the key was deleted")
	require.NoError(t, s.Release(testCtx(t), last))
	_, err = raw.Delete(testCtx(t), s.prefix, clientv3.WithPrefix())
	require.NoError(t, err)
	acquire("release and deleting the prefix")
	// A renewal of the deleted term must not bring it back.
	_, err = raw.Delete(testCtx(t), s.Key("job"))
	require.NoError(t, err)
	_, err = s.Renew(testCtx(t), last, time.Minute)
	require.ErrorIs(t, err, elector.ErrLeaseLost)
	require.NoError(t, s.Release(testCtx(t), last))
	_, err = s.Get(testCtx(t), "job")
	require.ErrorIs(t, err, elector.ErrNoLease, "renew and release of a deleted term write nothing")
}

// TestValueIsReadable proves the value format operators see with etcdctl,
// and that the token moves into the value from the first renewal on.
func TestValueIsReadable(t *testing.T) {
	srv := startEtcd(t)
	s := openStore(t, srv, WithPrefix(uniquePrefix()))
	raw := rawClient(t, srv)
	value := func() string {
		t.Helper()
		resp, err := raw.Get(testCtx(t), s.Key("job"))
		require.NoError(t, err)
		require.Len(t, resp.Kvs, 1)
		return string(resp.Kvs[0].Value)
	}
	l, err := s.TryAcquire(testCtx(t), "job", `web-1 <"x">`, 1500*time.Millisecond, elector.Lease{})
	require.NoError(t, err)
	v := value()
	t.Log(v)
	assert.Regexp(t, `^\{"released":false,"token":0,"holder":"web-1 <\\"x\\">","ttl":"1.5s","written":"[0-9T:.Z-]+"\}$`, v)

	r, err := s.Renew(testCtx(t), l, time.Minute)
	require.NoError(t, err)
	assert.Contains(t, value(), fmt.Sprintf(`{"released":false,"token":%d,`, l.Token))
	require.NoError(t, s.Release(testCtx(t), r))
	assert.Contains(t, value(), fmt.Sprintf(`{"released":true,"token":%d,`, l.Token))
}

// TestForeignValue proves that a lease key holding something etcdlease did
// not write is reported, naming the key, and never taken for a free lease
// or overwritten.
func TestForeignValue(t *testing.T) {
	srv := startEtcd(t)
	s := openStore(t, srv, WithPrefix(uniquePrefix()))
	_, err := rawClient(t, srv).Put(testCtx(t), s.Key("job"), "not json")
	require.NoError(t, err)
	_, err = s.Get(testCtx(t), "job")
	require.Error(t, err)
	assert.NotErrorIs(t, err, elector.ErrNoLease)
	assert.Contains(t, err.Error(), s.Key("job"))
	t.Log(err)
	_, err = s.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.Error(t, err)
	assert.NotErrorIs(t, err, elector.ErrHeld)
}

// TestForgedLeases proves that the compare-and-sets check every field the
// contract names, not only the version: a lease with the current version
// but another holder or token neither renews, releases nor takes over.
func TestForgedLeases(t *testing.T) {
	srv := startEtcd(t)
	s := openStore(t, srv, WithPrefix(uniquePrefix()))
	for _, renewed := range []bool{false, true} {
		name := fmt.Sprintf("job-%v", renewed)
		l, err := s.TryAcquire(testCtx(t), name, "a", time.Minute, elector.Lease{})
		require.NoError(t, err)
		if renewed {
			l, err = s.Renew(testCtx(t), l, time.Minute)
			require.NoError(t, err)
		}
		otherHolder, otherToken := l, l
		otherHolder.Holder = "b"
		otherToken.Token++
		for _, forged := range []elector.Lease{otherHolder, otherToken} {
			_, err = s.Renew(testCtx(t), forged, time.Minute)
			require.ErrorIs(t, err, elector.ErrLeaseLost, "renew %+v", forged)
			require.NoError(t, s.Release(testCtx(t), forged))
		}
		_, err = s.TryAcquire(testCtx(t), name, "c", time.Minute, otherToken)
		require.ErrorIs(t, err, elector.ErrHeld, "takeover observing %+v", otherToken)
		got, err := s.Get(testCtx(t), name)
		require.NoError(t, err)
		assert.Equal(t, l, got, "forged leases must change nothing")
	}
}
